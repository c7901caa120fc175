// Must compile: each library sees its own folder and what it depends on.
#include "host/runner_client.h"
#include "native/native_backend.h"
#include "sandbox/spec.h"
