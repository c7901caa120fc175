#!/usr/bin/python3
"""Pins tests/identity/vault_fixture.py to the real Vault API: python3-hvac, the
real client, drives every route the fixture serves and checks what hvac makes
of the answers. If the fixture drifts from Vault's shapes, hvac breaks here.

    vault_fixture_test.py     (ctest: rf_vault_fixture_pin, label identity)
"""
import os
import subprocess
import sys
import tempfile
import time
import unittest

import hvac
from hvac import exceptions

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "s.fixture-token-for-the-pin-test"


def start_fixture(tmp):
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN)
    port_file = os.path.join(tmp, "port")
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "vault_fixture.py"),
                             "--token-file", token_file, "--port-file", port_file])
    for _ in range(500):
        if os.path.exists(port_file):
            with open(port_file) as f:
                return proc, "http://127.0.0.1:%s" % f.read().strip()
        if proc.poll() is not None:
            raise RuntimeError("vault_fixture.py exited with %d" % proc.returncode)
        time.sleep(0.01)
    proc.kill()
    raise RuntimeError("vault_fixture.py did not write its port")


class FixtureSpeaksVault(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.proc, self.addr = start_fixture(self.tmp.name)
        self.client = hvac.Client(url=self.addr, token=TOKEN)
        self.kv = self.client.secrets.kv.v2

    def tearDown(self):
        self.proc.kill()
        self.proc.wait()
        self.tmp.cleanup()

    def test_health_and_token(self):
        self.assertTrue(self.client.sys.is_initialized())
        self.assertFalse(self.client.sys.is_sealed())
        self.assertTrue(self.client.is_authenticated())
        self.assertFalse(hvac.Client(url=self.addr, token="wrong").is_authenticated())

    def test_versions_round_trip(self):
        w1 = self.kv.create_or_update_secret("acme/anthropic", secret={"value": "v1"})
        self.assertEqual(w1["data"]["version"], 1)
        w2 = self.kv.create_or_update_secret("acme/anthropic", secret={"value": "v2"})
        self.assertEqual(w2["data"]["version"], 2)
        latest = self.kv.read_secret_version("acme/anthropic")
        self.assertEqual(latest["data"]["data"], {"value": "v2"})
        self.assertEqual(latest["data"]["metadata"]["version"], 2)
        self.assertEqual(latest["data"]["metadata"]["deletion_time"], "")
        self.assertFalse(latest["data"]["metadata"]["destroyed"])
        old = self.kv.read_secret_version("acme/anthropic", version=1)
        self.assertEqual(old["data"]["data"], {"value": "v1"})
        meta = self.kv.read_secret_metadata("acme/anthropic")
        self.assertEqual(meta["data"]["current_version"], 2)
        self.assertEqual(sorted(meta["data"]["versions"]), ["1", "2"])
        self.assertEqual(self.kv.list_secrets("acme")["data"]["keys"], ["anthropic"])

    def test_check_and_set(self):
        self.kv.create_or_update_secret("p", secret={"value": "a"}, cas=0)
        with self.assertRaises(exceptions.InvalidRequest):
            self.kv.create_or_update_secret("p", secret={"value": "b"}, cas=0)
        self.kv.create_or_update_secret("p", secret={"value": "b"}, cas=1)

    def test_deleted_and_destroyed_versions_are_not_found(self):
        self.kv.create_or_update_secret("p", secret={"value": "a"})
        self.kv.delete_latest_version_of_secret("p")
        with self.assertRaises(exceptions.InvalidPath):
            self.kv.read_secret_version("p")
        self.kv.undelete_secret_versions("p", versions=[1])
        self.assertEqual(self.kv.read_secret_version("p")["data"]["data"], {"value": "a"})
        self.kv.destroy_secret_versions("p", versions=[1])
        with self.assertRaises(exceptions.InvalidPath):
            self.kv.read_secret_version("p")
        self.kv.create_or_update_secret("q", secret={"value": "a"})
        self.kv.delete_secret_versions("q", versions=[1])
        with self.assertRaises(exceptions.InvalidPath):
            self.kv.read_secret_version("q")
        self.kv.delete_metadata_and_all_versions("q")
        with self.assertRaises(exceptions.InvalidPath):
            self.kv.read_secret_metadata("q")

    def test_missing_paths_and_mounts(self):
        with self.assertRaises(exceptions.InvalidPath):
            self.kv.read_secret_version("nothing/here")
        with self.assertRaises(exceptions.InvalidPath):
            self.kv.read_secret_version("p", mount_point="no-such-mount")

    def test_refused_tokens(self):
        with self.assertRaises(exceptions.Forbidden):
            hvac.Client(url=self.addr, token="wrong").secrets.kv.v2.read_secret_version("p")
        self.kv.create_or_update_secret("p", secret={"value": "a"})
        self.client.auth.token.revoke_self()
        with self.assertRaises(exceptions.Forbidden):
            self.kv.read_secret_version("p")
        self.assertFalse(self.client.is_authenticated())


if __name__ == "__main__":
    unittest.main()
