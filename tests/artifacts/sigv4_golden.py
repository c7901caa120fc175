#!/usr/bin/python3
"""Golden AWS SigV4 values computed by botocore, for checking ringfence's own signer.

    sigv4_golden.py < request.json      # prints one JSON object
    sigv4_golden.py --self-test         # AWS S3 SigV4 documentation examples; exit 1 on mismatch

Input (JSON on stdin):
  method          "GET", "PUT", ...
  host            "127.0.0.1:9000" or "examplebucket.s3.amazonaws.com" (the URL authority)
  path            as sent on the wire, already URI-encoded ("/bucket/a%20b"); S3 does not
                  normalise it (no ./.. removal, no double encoding)
  query           [[k, v], ...] decoded pairs; encoded like botocore's client does
                  (percent_encode_sequence: RFC 3986 unreserved kept, space -> %20).
                  A subresource without value ("?uploads") is ["uploads", ""].
  raw_query       (optional, instead of query) the query string exactly as on the wire
  headers         [[k, v], ...] every header that is sent (repeats allowed). Host is taken
                  from "host" unless a Host header is given. X-Amz-Date, X-Amz-Content-SHA256
                  and X-Amz-Security-Token are set by botocore (from amz_date, payload_sha256,
                  session_token); if given they must agree. User-Agent, Transfer-Encoding,
                  Expect, Connection... are never signed (botocore's blacklist).
  payload_sha256  hex sha256 of the body, or "UNSIGNED-PAYLOAD",
                  "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", ...: the x-amz-content-sha256 value
  access_key, secret_key, session_token (optional)
  region, service ("s3" uses botocore.auth.S3SigV4Auth, anything else SigV4Auth)
  amz_date        "YYYYMMDDTHHMMSSZ"
  scheme          (optional, "http") only matters for dropping a default port from Host

Output: {"authorization", "canonical_request", "string_to_sign", "signed_headers",
         "signature", "credential_scope", "headers": [[k, v], ...] as botocore would send}

Determinism: botocore's add_auth() reads the clock through botocore.auth.get_current_datetime
(older botocore: datetime.datetime.utcnow()); it is patched to return amz_date, and the
timestamp botocore actually used is checked. The body is never needed: payload() is
overridden to return payload_sha256, which is what botocore puts in X-Amz-Content-SHA256
and in the last line of the canonical request.
"""

import datetime
import json
import sys
from unittest import mock

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.utils import percent_encode_sequence

SIGV4_TIMESTAMP = "%Y%m%dT%H%M%SZ"


def _auth_class(service):
    base = botocore.auth.S3SigV4Auth if service == "s3" else botocore.auth.SigV4Auth

    class Capturing(base):
        """botocore's signer, unchanged except: fixed payload hash, and it keeps its work."""

        def __init__(self, credentials, service_name, region_name, payload_hash):
            super().__init__(credentials, service_name, region_name)
            self._payload_hash = payload_hash
            self.captured = {}

        def payload(self, request):
            return self._payload_hash

        def canonical_request(self, request):
            cr = super().canonical_request(request)
            self.captured["canonical_request"] = cr
            self.captured["signed_headers"] = self.signed_headers(self.headers_to_sign(request))
            return cr

        def string_to_sign(self, request, canonical_request):
            sts = super().string_to_sign(request, canonical_request)
            self.captured["string_to_sign"] = sts
            self.captured["credential_scope"] = self.credential_scope(request)
            return sts

        def signature(self, string_to_sign, request):
            sig = super().signature(string_to_sign, request)
            self.captured["signature"] = sig
            return sig

    return Capturing


class _FixedDatetime(datetime.datetime):
    fixed = None

    @classmethod
    def utcnow(cls):
        return cls.fixed

    @classmethod
    def now(cls, tz=None):
        return cls.fixed if tz is None else cls.fixed.replace(tzinfo=tz)


def _frozen_clock(when):
    """Patch whatever clock this botocore version's add_auth() reads."""
    if hasattr(botocore.auth, "get_current_datetime"):  # botocore >= ~1.31
        return mock.patch.object(botocore.auth, "get_current_datetime", lambda *a, **k: when)
    _FixedDatetime.fixed = when  # older: datetime.datetime.utcnow() via botocore.auth.datetime
    fake = mock.Mock(wraps=datetime)
    fake.datetime = _FixedDatetime
    return mock.patch.object(botocore.auth, "datetime", fake)


class InputError(Exception):
    pass


def sign(desc):
    for field in ("method", "host", "path", "payload_sha256", "access_key", "secret_key",
                  "region", "service", "amz_date"):
        if field not in desc:
            raise InputError(f"missing field {field!r}")
    amz_date = desc["amz_date"]
    try:
        when = datetime.datetime.strptime(amz_date, SIGV4_TIMESTAMP)
    except ValueError as e:
        raise InputError(f"amz_date {amz_date!r}: {e}") from None
    path = desc["path"]
    if not path.startswith("/"):
        raise InputError("path must start with '/'")
    if "query" in desc and "raw_query" in desc:
        raise InputError("give query or raw_query, not both")
    if "raw_query" in desc:
        query = desc["raw_query"]
    else:
        query = percent_encode_sequence([(k, v) for k, v in desc.get("query", [])])
    url = f"{desc.get('scheme', 'http')}://{desc['host']}{path}"
    if query:
        url += "?" + query

    token = desc.get("session_token") or None
    managed = {
        "x-amz-date": amz_date,
        "x-amz-content-sha256": desc["payload_sha256"],
        "x-amz-security-token": token,
    }
    if desc["service"] != "s3":
        del managed["x-amz-content-sha256"]  # plain SigV4Auth signs it only if it is sent
    request = AWSRequest(method=desc["method"], url=url)
    for name, value in desc.get("headers", []):
        lname = name.lower()
        if lname in managed:
            if value != managed[lname]:
                raise InputError(f"header {name}: {value!r} disagrees with the request "
                                 f"description ({managed[lname]!r})")
            continue  # botocore sets it itself
        if lname == "date":
            print("sigv4_golden.py: warning: with a Date header botocore signs Date "
                  "(rewritten from amz_date) and drops X-Amz-Date", file=sys.stderr)
        if lname == "authorization":
            continue
        request.headers[name] = value  # HTTPHeaders: assignment appends, repeats are kept

    creds = Credentials(desc["access_key"], desc["secret_key"], token)
    auth = _auth_class(desc["service"])(creds, desc["service"], desc["region"],
                                        desc["payload_sha256"])
    with _frozen_clock(when):
        auth.add_auth(request)
    if request.context.get("timestamp") != amz_date:
        raise RuntimeError(f"botocore signed at {request.context.get('timestamp')!r}, not "
                           f"{amz_date!r}: the clock patch does not fit this botocore "
                           f"({botocore.__version__})")
    out = {"authorization": request.headers["Authorization"]}
    out.update(auth.captured)
    out["headers"] = [[k, v] for k, v in request.headers.items()]
    return out


# From https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html
DOC_KEYS = {
    "access_key": "AKIAIOSFODNN7EXAMPLE",
    "secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "region": "us-east-1",
    "service": "s3",
    "amz_date": "20130524T000000Z",
    "host": "examplebucket.s3.amazonaws.com",
}
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
SELF_TESTS = [
    {
        "name": "GET /test.txt with Range",
        "request": dict(DOC_KEYS, method="GET", path="/test.txt", query=[],
                        headers=[["Range", "bytes=0-9"]], payload_sha256=EMPTY_SHA256),
        "expect": {
            "canonical_request": "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\n"
                                 "range:bytes=0-9\nx-amz-content-sha256:" + EMPTY_SHA256 +
                                 "\nx-amz-date:20130524T000000Z\n\n"
                                 "host;range;x-amz-content-sha256;x-amz-date\n" + EMPTY_SHA256,
            "string_to_sign": "AWS4-HMAC-SHA256\n20130524T000000Z\n"
                              "20130524/us-east-1/s3/aws4_request\n"
                              "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972",
            "signed_headers": "host;range;x-amz-content-sha256;x-amz-date",
            "authorization": "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/"
                             "us-east-1/s3/aws4_request, SignedHeaders=host;range;"
                             "x-amz-content-sha256;x-amz-date, Signature="
                             "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        },
    },
    {
        "name": "GET ?lifecycle (subresource without value)",
        "request": dict(DOC_KEYS, method="GET", path="/", query=[["lifecycle", ""]],
                        headers=[], payload_sha256=EMPTY_SHA256),
        "expect": {
            "signature": "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
        },
    },
    {
        "name": "GET ?max-keys=2&prefix=J (query sorted)",
        "request": dict(DOC_KEYS, method="GET", path="/",
                        query=[["max-keys", "2"], ["prefix", "J"]],
                        headers=[], payload_sha256=EMPTY_SHA256),
        "expect": {
            "signature": "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
        },
    },
]


def self_test():
    failed = 0
    for case in SELF_TESTS:
        got = sign(case["request"])
        bad = {k: (v, got.get(k)) for k, v in case["expect"].items() if got.get(k) != v}
        if bad:
            failed += 1
            print(f"FAIL {case['name']}", file=sys.stderr)
            for k, (want, have) in bad.items():
                print(f"  {k}:\n    want {want!r}\n    got  {have!r}", file=sys.stderr)
        else:
            print(f"ok   {case['name']}")
    print(f"botocore {botocore.__version__}: {len(SELF_TESTS) - failed}/{len(SELF_TESTS)} passed")
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) > 1:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        desc = json.load(sys.stdin)
        if not isinstance(desc, dict):
            raise InputError("input must be a JSON object")
        out = sign(desc)
    except (InputError, json.JSONDecodeError) as e:
        print(f"sigv4_golden.py: {e}", file=sys.stderr)
        return 2
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
