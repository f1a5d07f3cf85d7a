"""Run inside a private network namespace (``unshare --net``) by test_live.py: start
librdkafka's mock cluster, run ``kwsniff live -V -o`` with the JSON plugin on its port,
produce a JSON value with a real producer, and print what kwsniff showed as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer


def main() -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    mock = Producer({"bootstrap.servers": "", "test.mock.num.brokers": 1})
    port = next(iter(mock.list_topics(timeout=10).brokers.values())).port
    out_file = Path(tempfile.mkdtemp()) / "live.jsonl"
    live = subprocess.Popen(
        [sys.executable, "-m", "kwsniff", "live", "-i", "lo", "-p", str(port), "--duration", "6",
         "-V", "--color", "never", "-o", str(out_file), "--records",
         "--plugin-opt", "json.topics=live-json", "--plugin-opt", "trace.enabled=true"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
    producer.produce("live-json", b'{"hello": "live", "n": 7}', key=b"k1",
                     headers=[("traceparent",
                               b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")])
    producer.flush(10)
    out, err = live.communicate(timeout=60)
    records = [json.loads(line) for line in out_file.read_text().splitlines()]
    print(json.dumps({"rc": live.returncode, "tree": out, "stderr": err, "export": records}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
