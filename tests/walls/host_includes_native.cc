// Must not compile: host/ is the kit every backend shares and knows no backend.
#include "native/native_backend.h"
