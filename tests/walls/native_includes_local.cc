// Must not compile: one backend never reaches into another.
#include "local/local_backend.h"
