"""Scenario registry: name -> (description, function(ctx))."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..context import ScenarioContext


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    run: Callable[[ScenarioContext], None]


def all_scenarios() -> dict[str, Scenario]:
    """Every scenario, in generation order (imports are lazy: clients are heavy)."""
    from . import (aiokafka_client, insights, kafka_python_legacy, midstream, plugins, rdkafka,
                   tansu_admin, tansu_sasl)

    out: dict[str, Scenario] = {}
    for module in (rdkafka, kafka_python_legacy, aiokafka_client, tansu_admin, tansu_sasl,
                   midstream, plugins, insights):
        for sc in module.SCENARIOS:
            out[sc.name] = sc
    return out
