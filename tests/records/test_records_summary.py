"""``Records.summary()`` (one pass over the batches) says what the set's properties
say: batch count, ``record_count`` / ``record_count_exact``, magics, codecs other than
none, control / transactional / truncated flags. Checked on every record set of the
sample captures, cut at random lengths, before and after the records are decoded
(decoding a legacy compressed wrapper makes its count exact)."""

from __future__ import annotations

import random
from pathlib import Path

from kwsniff.capture.source import open_capture
from kwsniff.engine import Engine
from kwsniff.kafka.records import FORMAT_07, Records, parse_message_set_07
from record_sets import record_sets

ROOT = Path(__file__).resolve().parents[2]


def _from_properties(rs: Records) -> str:
    """The summary as its definition states it, from the public properties."""
    bs = rs.batches
    if not bs:
        return "empty" if not rs.data else "undecodable"
    n = rs.record_count
    codecs = sorted({b.codec_name for b in bs if b.attributes is not None} - {"none"})
    text = (f"{len(bs)} batch{'es' if len(bs) != 1 else ''}, "
            f"{'' if rs.record_count_exact else '>='}{n} record{'s' if n != 1 else ''}, "
            f"{'0.7 ' if rs.format == FORMAT_07 else ''}magic "
            + "/".join(str(m) for m in sorted({b.magic for b in bs}))
            + (" " + "/".join(codecs) if codecs else ""))
    flags = [name for name, on in (("control", any(b.control for b in bs)),
                                   ("transactional", any(b.transactional for b in bs)),
                                   ("truncated", rs.truncated)) if on]
    return ", ".join([text, *flags])


def _copy(rs: Records, data: bytes) -> Records:
    if rs.format == FORMAT_07:
        return parse_message_set_07(data, rs.base_position)
    return Records(data)


def test_summary_says_what_the_properties_say() -> None:
    rnd = random.Random(7)
    seen: set[str] = set()
    n = 0
    for path in sorted((ROOT / "pcaps").glob("*.pcap")):
        with open_capture(str(path)) as source:
            for ex in Engine().run(source):
                for msg in (ex.request, ex.response):
                    if msg is None or not isinstance(msg.body, dict):
                        continue
                    for rs in record_sets(msg.body):
                        for cut in (len(rs.data), rnd.randint(0, len(rs.data)),
                                    rnd.randint(0, len(rs.data))):
                            for decode in (False, True):
                                copy = _copy(rs, rs.data[:cut])
                                if decode:
                                    copy.decode()
                                text = copy.summary()
                                assert text == _from_properties(copy), (path.name, cut)
                                seen.add(text.split(", ", 2)[-1])
                                n += 1
    assert n > 500
    # the samples cover codecs, legacy magics, flags and truncation
    for word in ("gzip", "snappy", "lz4", "zstd", "magic 0", "magic 1", "truncated",
                 "transactional", "control"):
        assert any(word in s for s in seen), word
