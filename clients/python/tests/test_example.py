import os
import signal
import subprocess
import sys
import unittest

from flowd_server import REPO, FlowdServer, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "greet_worker.py")


class ExampleTest(unittest.TestCase):
    def test_greet_worker_completes_the_hello_workflow_and_stops_on_sigterm(self):
        server = FlowdServer()
        self.addCleanup(server.close)
        with open(os.path.join(REPO, "examples", "hello", "hello.yaml")) as f:
            server.client.put_definition("hello", f.read())

        env = {**os.environ, "FLOWD_SERVER": server.url,
               "PYTHONPATH": os.path.join(HERE, "..") + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc = subprocess.Popen([sys.executable, EXAMPLE], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))

        inst = server.client.start_workflow(definition="hello", input={"name": "Ada"})
        done = wait_for(server.client, inst.id)
        self.assertEqual(done.status, "COMPLETED")
        self.assertEqual(done.state["steps"]["greet"]["output"], {"greeting": "Hello, Ada!", "attempt": 1})

        failed = wait_for(server.client, server.client.start_workflow(definition="hello", input={"name": ""}).id)
        self.assertEqual(failed.status, "FAILED")
        self.assertIn("input.name is required", failed.state["steps"]["greet"]["error"])

        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 0, out)
        self.assertIn("stopped", out)


if __name__ == "__main__":
    unittest.main()
