// glibc's name services in the static `ringfence` (cmake/static_cli.cmake).
#pragma once

namespace rf::cli {

// Makes every name lookup of this process use the services built into glibc
// only: users and groups from /etc/passwd and /etc/group, hosts from
// /etc/hosts then DNS (/etc/resolv.conf), services and protocols from /etc.
// A static program cannot load NSS modules (libnss_systemd, mdns, sss...)
// safely: with the host's nsswitch.conf, getpwuid_r of a uid missing from
// /etc/passwd loaded libnss_systemd and crashed the static binary. Call it
// first thing in main(), before any thread starts.
void use_builtin_name_services();

}  // namespace rf::cli
