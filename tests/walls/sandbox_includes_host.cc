// Must not compile: the sandbox API is below the host kit.
#include "host/runner_client.h"
