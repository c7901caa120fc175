// Host side: the scratch directories of local sandboxes. Each sandbox gets
// <root>/<id> (mode 0700) with workspace/ and tmp/ inside; the root is a
// directory only the worker's user may write.
#pragma once

#include <string>

#include "core/result.h"

namespace rf::local {

// $TMPDIR (else /tmp) + "/ringfence-local".
std::string default_scratch_root();

// Creates `root` if it is missing (mode 0700; its parent must exist), checks it
// is a real directory that we own and no one else can write (else another user
// could plant the scratch directories), and returns its canonical path.
Result<std::string> prepare_scratch_root(const std::string& root);

// Creates <root>/<id> (mode 0700) with workspace/ and tmp/ inside. Fails if it
// exists already: a scratch directory is never shared.
Status create_scratch_dir(const std::string& root, const std::string& id);

// Removes <root>/<id> and everything below it, following no symlink (see
// remove_tree.h). A directory that is gone already is success.
Status remove_scratch_dir(const std::string& root, const std::string& id);

}  // namespace rf::local
