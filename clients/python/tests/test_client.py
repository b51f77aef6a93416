import unittest
import uuid

import flowd
from flowd import (BadRequestError, Client, ConflictError, NotFoundError,
                   PreconditionFailedError, TransportError)
from flowd_server import FlowdServer

server: FlowdServer


def setUpModule():
    global server
    server = FlowdServer()


def tearDownModule():
    server.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.client = server.client

    def test_start_get_and_patch_with_if_match(self):
        inst = self.client.start_workflow(id=unique("free"), state={"n": 1})
        self.assertTrue(inst.created)
        self.assertEqual(inst.version, 0)
        self.assertEqual(inst.etag, '"0"')

        got = self.client.get_workflow(inst.id)
        self.assertEqual((got.id, got.version, got.state["n"]), (inst.id, 0, 1))

        patched = self.client.patch_workflow(inst.id, {"n": 2}, if_match=got.version)
        self.assertEqual((patched.version, patched.state["n"]), (1, 2))

        with self.assertRaises(PreconditionFailedError) as cm:
            self.client.patch_workflow(inst.id, {"n": 3}, if_match=got.version)
        err = cm.exception
        self.assertIsInstance(err, ConflictError)
        self.assertEqual(err.status, 412)
        self.assertEqual(err.current_version, 1)
        self.assertEqual(err.current.state["n"], 2)
        self.assertEqual(self.client.get_workflow(inst.id).state["n"], 2, "a refused patch wrote nothing")

        anyway = self.client.patch_workflow(inst.id, {"n": 4}, if_match="*")
        self.assertEqual((anyway.version, anyway.state["n"]), (2, 4))

    def test_list_workflows_by_filter_page_by_page(self):
        tag = unique("list")
        ids = [self.client.start_workflow(id=f"{tag}-{i}", search={"batch": tag, "n": i}).id for i in range(3)]
        self.client.start_workflow(id=unique("other"), search={"batch": "other"})

        page, cursor = self.client.list_workflows(search={"batch": tag}, limit=2)
        self.assertEqual([w.id for w in page], [ids[2], ids[1]], "newest first")
        self.assertIsNotNone(cursor)
        rest, cursor = self.client.list_workflows(search={"batch": tag}, limit=2, cursor=cursor)
        self.assertEqual(([w.id for w in rest], cursor), ([ids[0]], None))
        self.assertEqual(page[0].search, {"batch": tag, "n": 2})

        both, _ = self.client.list_workflows(search={"batch": tag, "n": 1})
        self.assertEqual([w.id for w in both], [ids[1]], "attributes are ANDed; a number as written")
        self.assertEqual([w.id for w in self.client.iter_workflows(id_prefix=tag + "-", limit=1)], ids[::-1])

        with self.assertRaises(BadRequestError) as cm:
            self.client.list_workflows(limit=0)
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("limit", str(cm.exception))

    def test_update_workflow_retries_a_lost_race(self):
        inst = self.client.start_workflow(id=unique("race"), state={"n": 0})
        calls = []

        def increment(current):
            calls.append(current.version)
            if len(calls) == 1:
                # Another writer gets in between this read and its patch.
                self.client.patch_workflow(inst.id, {"n": current.state["n"] + 10}, if_match="*")
            return {"n": current.state["n"] + 1}

        out = self.client.update_workflow(inst.id, increment)
        self.assertEqual(out.state["n"], 11)
        self.assertEqual(calls, [0, 1])

    def test_start_with_idempotency_key_creates_once(self):
        key = unique("key")
        first = self.client.start_workflow(state={"a": 1}, idempotency_key=key)
        again = self.client.start_workflow(state={"a": 1}, idempotency_key=key)
        self.assertTrue(first.created)
        self.assertFalse(again.created)
        self.assertEqual(again.id, first.id)

    def test_complete_wait_step_with_if_match(self):
        name = unique("approval")
        self.client.put_definition(name, {"name": name, "steps": [{"id": "approve", "type": "wait"}]})
        inst = self.client.start_workflow(definition=name, id=unique("wf"))
        current = self.client.get_workflow(inst.id)
        self.client.patch_workflow(inst.id, {"note": "moved on"}, if_match=current.version)

        with self.assertRaises(PreconditionFailedError) as cm:
            self.client.complete_step(inst.id, "approve", {"ok": True}, if_match=current.version)
        self.assertEqual(cm.exception.current_version, current.version + 1)

        done = self.client.complete_step(inst.id, "approve", {"ok": True}, if_match=cm.exception.current_version)
        self.assertEqual(done.state["steps"]["approve"]["status"], "COMPLETED")
        self.assertEqual(done.state["steps"]["approve"]["output"], {"ok": True})

        with self.assertRaises(ConflictError) as cm:
            self.client.complete_step(inst.id, "approve", {"ok": False}, if_match="*")
        self.assertEqual(cm.exception.status, 409)
        self.assertNotIsInstance(cm.exception, PreconditionFailedError)
        self.assertEqual(cm.exception.current_version, self.client.get_workflow(inst.id).version)

    def test_errors_by_status(self):
        with self.assertRaises(NotFoundError) as cm:
            self.client.get_workflow(unique("missing"))
        self.assertEqual(cm.exception.status, 404)
        self.assertIn("not found", cm.exception.message)

        with self.assertRaises(NotFoundError):
            self.client.start_workflow(definition=unique("no-such-definition"))

        with self.assertRaises(NotFoundError):
            self.client.complete_step(unique("missing"), "s", None, if_match="*")

        with self.assertRaises(BadRequestError) as cm:
            name = unique("bad")
            self.client.put_definition(name, {"name": name, "steps": [{"id": "a", "type": "nonsense"}]})
        self.assertTrue(cm.exception.problems, "a refused definition lists its problems")

        taken = self.client.start_workflow(id=unique("taken"))
        with self.assertRaises(ConflictError) as cm:
            self.client.start_workflow(id=taken.id)
        self.assertEqual(cm.exception.status, 409)

        with self.assertRaises(TypeError):
            self.client.patch_workflow(taken.id, {}, if_match=None)

    def test_unreachable_server_is_a_transport_error(self):
        client = Client("http://127.0.0.1:9", timeout=5)
        with self.assertRaises(TransportError):
            client.get_workflow("x")

    def test_bad_base_url(self):
        for url in ("ftp://host", "localhost:8080", "http://user:pw@host", "http://host/?q=1"):
            with self.subTest(url=url), self.assertRaises(ValueError):
                flowd.Client(url)


if __name__ == "__main__":
    unittest.main()
