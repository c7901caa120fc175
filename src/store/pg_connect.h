// One libpq connection as the store's PostgreSQL engine opens it (db_postgres.cc):
// a 10 s connect timeout unless the URI says otherwise, server notices
// dropped (libpq prints them to stderr). Internal to rf_store_postgres, shared
// by the engine and its doorbell relay (pg_bell.cc).
#pragma once

#include <libpq-fe.h>

#include <string>

namespace rf::store::engine {
// Null only when out of memory; otherwise check PQstatus (a failed connection
// holds its error for PQerrorMessage) and PQfinish it.
PGconn* pg_connect(const std::string& uri);
}  // namespace rf::store::engine
