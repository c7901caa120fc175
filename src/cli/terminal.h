// The host terminal for `sandbox shell`: raw mode while the shell runs, restored
// on every exit path.
#pragma once

#include <termios.h>

namespace rf::cli {

class RawTerminal {
 public:
  explicit RawTerminal(int fd);
  ~RawTerminal();
  bool active() const { return active_; }

 private:
  int fd_;
  bool active_ = false;
  termios saved_{};
};

// Rows and columns of the terminal on `fd`, or 24x80.
void terminal_size(int fd, int* rows, int* cols);

}  // namespace rf::cli
