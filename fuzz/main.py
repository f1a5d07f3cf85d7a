"""Run one fuzz target under atheris (libFuzzer, coverage-guided).

Usage: ``python -m fuzz.main TARGET [CORPUS_DIR ...] [-libfuzzer_flag=value ...]``
(run from the repository root; ``python -m fuzz.run`` drives this for every target).

kwsniff's decoding layers are instrumented for coverage when imported here. Targets
that set ``INSTRUMENT_GENERATED = True`` also get the decode functions the protocol
layer generates at run time from the schema table instrumented (an import hook alone
would not see them); that costs about 0.1 s per compiled schema version, so only the
schema-decoder targets pay it. Where the field-decoder kernel stands in front of a generated
decoder, the Python function behind it is the one instrumented.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

#: kwsniff packages and modules the fuzzers exercise (interactive front ends and the
#: live-capture bindings are left out)
INSTRUMENTED = ("kwsniff.capture", "kwsniff.tcp", "kwsniff.kafka", "kwsniff.output",
                "kwsniff.engine")
SKIPPED = ("kwsniff.capture.live", "kwsniff.capture.libpcap")


def _import_all() -> None:
    for name in INSTRUMENTED:
        mod = importlib.import_module(name)
        path = getattr(mod, "__path__", None)
        if path is None:
            continue
        for info in pkgutil.walk_packages(path, prefix=name + "."):
            if not info.name.startswith(SKIPPED):
                importlib.import_module(info.name)


def _instrument_generated_decoders(atheris: object) -> None:
    from kwsniff.kafka.protocol import codegen, decoder
    from kwsniff.kafka.protocol.cprogram import decode_fields, python_function, with_accelerator

    original = codegen.compile_decoder

    def compile_instrumented(*args: object, **kwargs: object) -> object:
        fn = original(*args, **kwargs)  # type: ignore[arg-type]
        python = getattr(fn, "python", None)
        if python is None:
            return atheris.instrument_func(fn)  # type: ignore[attr-defined]
        # The C decoder runs first: the generated Python behind it is what gets the
        # coverage counters (instrumenting the wrapper would count one branch).
        return with_accelerator(
            atheris.instrument_func(python_function(fn)),  # type: ignore[attr-defined]
            fn.program, decode_fields)

    decoder.compile_decoder = compile_instrumented  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv if argv is None else argv)
    if len(args) < 2 or args[1].startswith("-"):
        from fuzz.targets import TARGETS
        sys.exit(f"usage: python -m fuzz.main TARGET [libFuzzer args]\n"
                 f"targets: {', '.join(TARGETS)}")
    name = args.pop(1)
    import atheris

    with atheris.instrument_imports(include=["kwsniff"]):
        _import_all()
        from fuzz.targets import load
        target = load(name)
    if getattr(target, "INSTRUMENT_GENERATED", False):
        _instrument_generated_decoders(atheris)
    atheris.Setup(args, target.one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
