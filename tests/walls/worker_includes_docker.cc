// Must not compile: the worker reaches backends only through the registry.
#include "docker/docker_backend.h"
