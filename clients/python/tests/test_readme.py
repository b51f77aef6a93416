"""The README's workflow runs as written: its first Python block, with only
the server's URL replaced, serves "order" until a started order, paid, is
shipped."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

from flowd import APIError
from flowd_server import FlowdServer, wait_for

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


class ReadmeTest(unittest.TestCase):
    def test_the_readmes_workflow_runs_as_written(self) -> None:
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            block = re.search(r"```python\n(.*?)\n```", f.read(), re.S)
        self.assertIsNotNone(block, "no ```python block in README.md")
        assert block is not None
        code = block.group(1)
        self.assertIn('"http://127.0.0.1:8080"', code, "the README's workflow no longer names the default server")
        server = FlowdServer()
        self.addCleanup(server.close)
        tmp = tempfile.TemporaryDirectory(prefix="flowd-readme-")
        self.addCleanup(tmp.cleanup)
        path = os.path.join(tmp.name, "order.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(code.replace('"http://127.0.0.1:8080"', json.dumps(server.url)))
        worker = subprocess.Popen([sys.executable, path], env={**os.environ, "PYTHONPATH": ROOT},
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def stop() -> None:
            worker.kill()
            worker.wait()
            assert worker.stdout is not None
            worker.stdout.close()
        self.addCleanup(stop)

        # The worker puts the definition when it starts.
        deadline = time.monotonic() + 15
        while True:
            try:
                server.client.start_workflow("order", input={"id": "A7"}, id="o-1")
                break
            except APIError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        # Published before the wait begins: it is kept for the wait.
        server.client.publish_event("payment", key="A7", data={})
        done = wait_for(server.client, "o-1", timeout=40)
        self.assertEqual(done.status, "COMPLETED", done.state)
        self.assertEqual(done.output["charge"], "ch_o-1/charge")
        self.assertEqual(done.output["shipment"], "shp_o-1/ship")


if __name__ == "__main__":
    unittest.main()
