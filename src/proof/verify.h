// Offline verification of a receipt file (proof/proof_log.h's bundle) with
// only the signer's public key: both signatures, that the receipt names this
// report, each audit event's hash, its inclusion in the log under a checkpoint
// the key signed. What the bounds say is returned, not judged: the caller
// decides what a bound not held means (`audit verify` fails on one).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"
#include "proof/boundary_report.h"
#include "proof/signing_key.h"

namespace rf::proof {

struct BundleVerdict {
  BoundSummary bounds;
  nlohmann::json receipt, report;  // the statements
  std::string origin;
  uint64_t log_size = 0;
};

// The first check that fails is the error, and names what failed:
// "receipt: the signature does not match its payload ...".
Result<BundleVerdict> verify_bundle(const nlohmann::json& bundle, const PublicKey& key);

}  // namespace rf::proof
