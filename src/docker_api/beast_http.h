// Boost.Beast's HTTP, as every HTTP client of ours includes it (the Docker
// API, Vault, the worker's own requests). GCC 12 with -fsanitize=address sees
// boost::optional in Beast 1.74's parser as maybe-uninitialized: a false
// positive in Boost's code, silenced here only (clang has no such warning).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/beast/http.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
