#include "cli/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

namespace rf::cli {

RawTerminal::RawTerminal(int fd) : fd_(fd) {
  if (!::isatty(fd) || ::tcgetattr(fd, &saved_) != 0) return;
  termios raw = saved_;
  ::cfmakeraw(&raw);
  active_ = ::tcsetattr(fd, TCSANOW, &raw) == 0;
}

RawTerminal::~RawTerminal() {
  if (active_) ::tcsetattr(fd_, TCSANOW, &saved_);
}

void terminal_size(int fd, int* rows, int* cols) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
    *rows = ws.ws_row;
    *cols = ws.ws_col;
    return;
  }
  *rows = 24;
  *cols = 80;
}

}  // namespace rf::cli
