#!/usr/bin/python3
"""python3-hvac, the real Vault client, as a command for the C++ tests: they
check that what ringfence writes hvac reads, and the other way round.

    VAULT_ADDR=... VAULT_TOKEN=... hvac_probe.py read PATH [--mount M]
        prints {"version": N, "value": "..."} (the "value" field), or
        {"error": "<hvac exception class>"} and exits 1
    hvac_probe.py write PATH [--mount M]      the value from stdin; prints {"version": N}
    hvac_probe.py delete PATH | destroy PATH VERSION | revoke-self
"""
import json
import os
import sys

import hvac


def main():
    args = sys.argv[1:]
    mount = "secret"
    if "--mount" in args:
        i = args.index("--mount")
        mount = args[i + 1]
        del args[i:i + 2]
    client = hvac.Client(url=os.environ["VAULT_ADDR"], token=os.environ["VAULT_TOKEN"])
    kv = client.secrets.kv.v2
    try:
        if args[0] == "read":
            r = kv.read_secret_version(args[1], mount_point=mount)
            out = {"version": r["data"]["metadata"]["version"],
                   "value": r["data"]["data"].get("value")}
        elif args[0] == "write":
            r = kv.create_or_update_secret(args[1], secret={"value": sys.stdin.read()},
                                           mount_point=mount)
            out = {"version": r["data"]["version"]}
        elif args[0] == "delete":
            kv.delete_latest_version_of_secret(args[1], mount_point=mount)
            out = {}
        elif args[0] == "destroy":
            kv.destroy_secret_versions(args[1], versions=[int(args[2])], mount_point=mount)
            out = {}
        elif args[0] == "revoke-self":
            client.auth.token.revoke_self()
            out = {}
        else:
            sys.exit("hvac_probe.py: unknown command %s" % args[0])
    except hvac.exceptions.VaultError as e:
        print(json.dumps({"error": type(e).__name__}))
        sys.exit(1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
