// rf-testprog: a tiny program with verbs that tests run inside sandboxes. Each
// verb tries one thing and prints its exact outcome on one line: "ok ..." or
// "errno NAME" (EPERM, EACCES, ...), so a test can assert it precisely.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>

namespace {

const char* errno_name(int e) {
  switch (e) {
    case EPERM:
      return "EPERM";
    case ENOENT:
      return "ENOENT";
    case ESRCH:
      return "ESRCH";
    case EACCES:
      return "EACCES";
    case EROFS:
      return "EROFS";
    case ENOSYS:
      return "ENOSYS";
    case EINVAL:
      return "EINVAL";
    case EAGAIN:
      return "EAGAIN";
    case ENOSPC:
      return "ENOSPC";
    case ETXTBSY:
      return "ETXTBSY";
    case EAFNOSUPPORT:
      return "EAFNOSUPPORT";
    case ENETUNREACH:
      return "ENETUNREACH";
    case ECONNREFUSED:
      return "ECONNREFUSED";
    case EBADF:
      return "EBADF";
    case EEXIST:
      return "EEXIST";
    case EFBIG:
      return "EFBIG";
    case ENOMEM:
      return "ENOMEM";
    case EXDEV:
      return "EXDEV";
    case ENODEV:
      return "ENODEV";
    case EOPNOTSUPP:
      return "EOPNOTSUPP";
    case EMFILE:
      return "EMFILE";
    case ENOTTY:
      return "ENOTTY";
    case EIO:
      return "EIO";
    default:
      return "OTHER";
  }
}

// Prints "ok" or "errno NAME" for a syscall-style return value.
int report(long rc) {
  if (rc >= 0) {
    std::printf("ok\n");
    return 0;
  }
  std::printf("errno %s\n", errno_name(errno));
  return 1;
}

int try_open(const char* path, int flags) {
  const int fd = ::open(path, flags, 0644);
  if (fd >= 0) ::close(fd);
  return report(fd);
}

using Verb = std::function<int(int argc, char** argv)>;

std::map<std::string, Verb> verbs() {
  std::map<std::string, Verb> v;
  v["echo"] = [](int argc, char** argv) {
    for (int i = 0; i < argc; ++i) std::printf("%s%s", i ? " " : "", argv[i]);
    std::printf("\n");
    return 0;
  };
  // Files.
  v["read"] = [](int, char** argv) { return try_open(argv[0], O_RDONLY); };
  v["write"] = [](int, char** argv) { return try_open(argv[0], O_WRONLY); };
  v["create"] = [](int, char** argv) { return try_open(argv[0], O_WRONLY | O_CREAT | O_TRUNC); };
  v["mkdir"] = [](int, char** argv) { return report(::mkdir(argv[0], 0755)); };
  v["mknod"] = [](int, char** argv) {
    return report(::mknod(argv[0], S_IFCHR | 0666, makedev(1, 3)));
  };
  v["chmod_suid"] = [](int, char** argv) { return report(::chmod(argv[0], 04755)); };
  v["exists"] = [](int, char** argv) {
    struct stat st {};
    return report(::lstat(argv[0], &st));
  };
  // Fill a file until the disk (or file size limit) says no, or MAX_MIB
  // (optional) were written; print how it ended.
  v["fill"] = [](int argc, char** argv) {
    const long max = argc > 1 ? std::atol(argv[1]) << 20 : -1;
    ::signal(SIGXFSZ, SIG_IGN);
    const int fd = ::open(argv[0], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return report(-1);
    static char buf[1 << 20];
    std::memset(buf, 'x', sizeof buf);
    long total = 0;
    for (;;) {
      const ssize_t n = ::write(fd, buf, sizeof buf);
      if (n < 0) {
        std::printf("errno %s after %ld MiB\n", errno_name(errno), total >> 20);
        return 1;
      }
      total += n;
      if (max >= 0 && total >= max) {
        std::printf("ok %ld MiB\n", total >> 20);
        return 0;
      }
    }
  };
  // files DIR: makes empty files in DIR until one fails (or 1,000,000).
  v["files"] = [](int, char** argv) {
    for (long i = 0; i < 1'000'000; ++i) {
      const std::string path = std::string(argv[0]) + "/f" + std::to_string(i);
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) {
        std::printf("errno %s after %ld files\n", errno_name(errno), i);
        return 1;
      }
      ::close(fd);
    }
    std::printf("ok 1000000 files\n");
    return 0;
  };
  // alloc MIB: mallocs MIB MiB and touches every byte (so it is resident and
  // charged to the cgroup), then exits.
  v["alloc"] = [](int, char** argv) {
    const size_t size = static_cast<size_t>(std::atol(argv[0])) << 20;
    void* mem = std::malloc(size);
    if (mem == nullptr) return report(-1);
    std::memset(mem, 1, size);
    asm volatile("" : : "r"(mem) : "memory");  // the stores are not dead: keep them
    std::printf("ok %zu MiB\n", size >> 20);
    std::free(mem);
    return 0;
  };
  // Processes and identity.
  v["ids"] = [](int, char**) {
    std::printf("uid=%d gid=%d euid=%d\n", getuid(), getgid(), geteuid());
    return 0;
  };
  v["status"] = [](int, char** argv) {  // prints one line of /proc/self/status
    FILE* f = std::fopen("/proc/self/status", "r");
    char line[512];
    while (f && std::fgets(line, sizeof line, f)) {
      if (std::strncmp(line, argv[0], std::strlen(argv[0])) == 0) std::fputs(line, stdout);
    }
    if (f) std::fclose(f);
    return 0;
  };
  v["fds"] = [](int, char**) {  // the open fds, except the one listing them
    std::string out;
    for (int fd = 0; fd < 1024; ++fd) {
      if (::fcntl(fd, F_GETFD) >= 0) out += (out.empty() ? "" : " ") + std::to_string(fd);
    }
    std::printf("%s\n", out.c_str());
    return 0;
  };
  // connect ADDR PORT: a TCP connection to an IPv4 address (tests: loopback only).
  v["connect"] = [](int, char** argv) {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return report(s);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[1])));
    ::inet_pton(AF_INET, argv[0], &a.sin_addr);
    return report(::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a));
  };
  // resolve NAME: "resolved" or "refused" (getaddrinfo, as any tool would).
  v["resolve"] = [](int, char** argv) {
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(argv[0], "80", nullptr, &res);
    if (rc == 0) ::freeaddrinfo(res);
    std::printf("%s\n", rc == 0 ? "resolved" : "refused");
    return 0;
  };
  v["setuid0"] = [](int, char**) { return report(::setuid(0)); };
  v["kill"] = [](int, char** argv) {
    return report(::kill(std::atoi(argv[0]), std::atoi(argv[1])));
  };
  v["getppid"] = [](int, char**) {
    std::printf("%d\n", getppid());
    return 0;
  };
  v["sleep"] = [](int, char** argv) {
    ::sleep(static_cast<unsigned>(std::atoi(argv[0])));
    return 0;
  };
  // Resource bombs: each prints how it was stopped, if it was not killed.
  v["forkbomb"] = [](int, char**) {
    int made = 0;
    for (int i = 0; i < 100000; ++i) {
      const pid_t p = ::fork();
      if (p == 0) {
        ::pause();
        _exit(0);
      }
      if (p < 0) {
        std::printf("errno %s after %d\n", errno_name(errno), made);
        std::fflush(stdout);
        ::kill(0, SIGKILL);
        return 1;
      }
      ++made;
    }
    std::printf("ok %d\n", made);
    return 0;
  };
  v["membomb"] = [](int, char** argv) {
    const long mib = std::atol(argv[0]);
    for (long i = 0; i < mib; ++i) {
      void* p =
          ::mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return report(-1);
      std::memset(p, 1, 1 << 20);
    }
    std::printf("ok %ld MiB\n", mib);
    return 0;
  };
  v["flood"] = [](int, char**) -> int {
    static char buf[65536];
    std::memset(buf, 'y', sizeof buf);
    for (;;) {
      if (::write(1, buf, sizeof buf) < 0) return 1;
    }
  };
  v["coredump"] = [](int, char**) {
    struct rlimit rl {
      RLIM_INFINITY, RLIM_INFINITY
    };
    std::printf("raise core limit: ");
    report(::setrlimit(RLIMIT_CORE, &rl));
    std::fflush(stdout);
    ::abort();
    return 0;
  };
  // Syscalls the seccomp profile refuses.
  v["syscall"] = [](int, char** argv) {
    const std::string n = argv[0];
    if (n == "bpf") return report(::syscall(SYS_bpf, 0, nullptr, 0));
    if (n == "keyctl") return report(::syscall(SYS_keyctl, 0, 0, 0, 0, 0));
    if (n == "add_key") return report(::syscall(SYS_add_key, "user", "x", "y", 1, 0));
    if (n == "userfaultfd") return report(::syscall(SYS_userfaultfd, 0));
    if (n == "perf_event_open")
      return report(::syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0));
    if (n == "io_uring_setup") return report(::syscall(SYS_io_uring_setup, 1, nullptr));
    if (n == "ptrace") return report(::syscall(SYS_ptrace, 0 /*TRACEME*/, 0, 0, 0));
    if (n == "process_vm_readv")
      return report(::syscall(SYS_process_vm_readv, 1, nullptr, 0, nullptr, 0, 0));
    if (n == "mount_tmpfs") return report(::mount("tmpfs", "/tmp", "tmpfs", 0, nullptr));
    if (n == "mount_cgroup") return report(::mount("cgroup", "/tmp", "cgroup", 0, "memory"));
    if (n == "umount_proc") return report(::umount2("/proc", MNT_DETACH));
    if (n == "pivot_root") return report(::syscall(SYS_pivot_root, "/tmp", "/tmp"));
    if (n == "unshare_user") return report(::unshare(CLONE_NEWUSER));
    if (n == "unshare_net") return report(::unshare(CLONE_NEWNET));
    if (n == "setns") return report(::setns(0, 0));
    if (n == "clone_newuser") {
      const long rc =
          ::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
      if (rc == 0) _exit(0);
      return report(rc);
    }
    if (n == "clone3") return report(::syscall(SYS_clone3, nullptr, 0));
    // Each asked so that, were it let through (this program run as root on a
    // host by mistake), the kernel would refuse it after its permission
    // check and change nothing: kexec_load with no segments unloads the
    // loaded kernel, one more than it takes is EINVAL; reboot with a command
    // it does not know is EINVAL, where RESTART would restart the machine.
    if (n == "kexec_load") return report(::syscall(SYS_kexec_load, 0, 17, nullptr, 0));
    if (n == "init_module") return report(::syscall(SYS_init_module, nullptr, 0, ""));
    if (n == "open_by_handle_at") return report(::syscall(SYS_open_by_handle_at, 0, nullptr, 0));
    if (n == "reboot")
      return report(::syscall(SYS_reboot, 0xfee1dead, 672274793, 0x7e57ab1e, nullptr));
    if (n == "swapon") return report(::syscall(SYS_swapon, "/tmp/x", 0));
    if (n == "acct") return report(::syscall(SYS_acct, "/tmp/x"));
    if (n == "syslog") return report(::syscall(SYS_syslog, 3, nullptr, 0));
    if (n == "chroot") return report(::chroot("/tmp"));
    if (n == "sethostname") return report(::sethostname("evil", 4));
    if (n == "personality")
      return report(::syscall(SYS_personality, 0x0040000 /*ADDR_NO_RANDOMIZE*/));
    if (n == "tiocsti") {
      char c = 'x';
      return report(::ioctl(0, TIOCSTI, &c));
    }
    if (n == "tiocsti_high") {
      char c = 'x';
      return report(::syscall(SYS_ioctl, 0, 0x100000000ul | TIOCSTI, &c));
    }
    if (n == "tioclinux") {
      char c = 3;
      return report(::ioctl(0, TIOCLINUX, &c));
    }
    if (n == "socket_alg") return report(::socket(38 /*AF_ALG*/, SOCK_SEQPACKET, 0));
    if (n == "socket_vsock") return report(::socket(40 /*AF_VSOCK*/, SOCK_STREAM, 0));
    if (n == "socket_packet") return report(::socket(17 /*AF_PACKET*/, SOCK_RAW, 0));
    if (n == "socket_inet") return report(::socket(AF_INET, SOCK_STREAM, 0));
    if (n == "i386") {  // getpid through the 32-bit entry point
      long rc;
      asm volatile("int $0x80" : "=a"(rc) : "a"(20) : "memory");
      std::printf("ok %ld\n", rc);
      return 0;
    }
    if (n == "x32") return report(::syscall(0x40000000 | SYS_getpid));
    std::printf("unknown syscall verb %s\n", n.c_str());
    return 2;
  };
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    std::fprintf(stderr, "usage: rf-testprog VERB [ARG...]\n");
    return 2;
  }
  auto all = verbs();
  auto it = all.find(argv[1]);
  if (it == all.end()) {
    std::fprintf(stderr, "unknown verb %s\n", argv[1]);
    return 2;
  }
  return it->second(argc - 2, argv + 2);
}
