// A `ringfence` process (the real binary, RF_CLI_PATH) whose stdout and
// stderr a test reads as they come, with stdin from a string or /dev/null.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace rf::testing {

// A `ringfence` process whose stdout and stderr the test reads as they come.
class Cli {
 public:
  // `stdin_data`: what the process reads on stdin (then EOF); none: /dev/null.
  // `netns`: the name of a network namespace (/run/netns/NAME, one the test
  // made) the process runs in.
  explicit Cli(const std::vector<std::string>& args,
               std::optional<std::string> stdin_data = std::nullopt,
               const std::vector<std::string>& extra_env = {}, const std::string& netns = "") {
    int out[2], err[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
    // stdin from a memfd: any size, and no writer blocked on a reader that stops early.
    int input = -1;
    if (stdin_data) {
      input = ::memfd_create("rf-cli-stdin", MFD_CLOEXEC);
      EXPECT_EQ(::write(input, stdin_data->data(), stdin_data->size()),
                static_cast<ssize_t>(stdin_data->size()));
      ::lseek(input, 0, SEEK_SET);
    }
    std::vector<char*> envp;
    for (char** e = environ; *e; ++e) envp.push_back(*e);
    for (const auto& kv : extra_env) envp.push_back(const_cast<char*>(kv.c_str()));
    envp.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::dup2(input >= 0 ? input : ::open("/dev/null", O_RDONLY), 0);
      if (!netns.empty()) {
        const int ns = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
        if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(98);
      }
      std::vector<char*> argv{const_cast<char*>(RF_CLI_PATH)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execve(RF_CLI_PATH, argv.data(), envp.data());
      ::_exit(99);
    }
    ::close(out[1]);
    ::close(err[1]);
    if (input >= 0) ::close(input);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }
  ~Cli() {
    if (pid_ > 0 && status_ < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_fd_);
    ::close(err_fd_);
  }
  // Reads stderr (stdout) until it holds `text` or `within` passes; true when it does.
  bool stderr_shows(const std::string& text, std::chrono::milliseconds within) {
    return shows(err_, text, within);
  }
  bool stdout_shows(const std::string& text, std::chrono::milliseconds within) {
    return shows(out_, text, within);
  }
  bool running() { return status_ < 0 && ::waitpid(pid_, &status_, WNOHANG) == 0; }
  // Waits for the exit (reading everything); returns the exit code, -1 on timeout.
  int wait(std::chrono::milliseconds within = std::chrono::seconds(30)) {
    const auto end = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < end) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (!read_some(std::min(left, std::chrono::milliseconds(100))) && eof_out_ && eof_err_) break;
    }
    if (status_ < 0 && ::waitpid(pid_, &status_, 0) != pid_) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  void signal(int sig) { ::kill(pid_, sig); }
  pid_t pid() const { return pid_; }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  bool shows(const std::string& seen, const std::string& text, std::chrono::milliseconds within) {
    const auto end = std::chrono::steady_clock::now() + within;
    while (seen.find(text) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left <= std::chrono::milliseconds(0) || !read_some(left)) break;
    }
    return seen.find(text) != std::string::npos;
  }
  // Reads what is there within `timeout`; false when nothing was read.
  bool read_some(std::chrono::milliseconds timeout) {
    pollfd fds[2] = {{eof_out_ ? -1 : out_fd_, POLLIN, 0}, {eof_err_ ? -1 : err_fd_, POLLIN, 0}};
    if (eof_out_ && eof_err_) return false;
    if (::poll(fds, 2, static_cast<int>(timeout.count())) <= 0) return false;
    bool got = false;
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        (i == 0 ? eof_out_ : eof_err_) = true;
        continue;
      }
      (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
      got = true;
    }
    return got || (eof_out_ && eof_err_);
  }

  pid_t pid_ = -1;
  int status_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  bool eof_out_ = false, eof_err_ = false;
  std::string out_, err_;
};

}  // namespace rf::testing
