// The store's PostgreSQL engine (db_postgres.cc, library rf_store_postgres).
// A program that links it calls enable_postgres() once, before it opens a
// store: then Db::open and Store::open take postgres:// URIs too. Without it
// they refuse one, saying the program has no PostgreSQL.
#pragma once

namespace rf::store {
void enable_postgres();
}  // namespace rf::store
