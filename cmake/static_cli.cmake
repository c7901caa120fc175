# The `ringfence` executable, linked statically (issue 10: a CLI that starts in
# a millisecond). Dynamically linked, every call of ringfence loaded 23 shared
# libraries and spent most of its start in the loader's symbol relocation; the
# static-pie binary has no loader, only its own relative relocations (packed,
# DT_RELR), and keeps ASLR (a plain -static binary would lose it, and its
# first C++ exception sorts every unwind entry of the binary: +30 ms measured).
#
# Only the executable is static: the libraries, tests, benchmarks and the
# sanitizer builds link the shared libraries as before. The folders' libraries
# depend on the third-party targets below (rf::sqlite3, ...), which give a
# target whose RF_STATIC_LINK property is set the static archives, and every
# other target the shared libraries found by the top-level CMakeLists.txt.
#
# The static binary uses glibc's name services built into libc only (files
# and dns, see src/cli/name_services.h): a static program cannot load NSS modules
# such as libnss_systemd safely.

if(RF_SANITIZE OR RF_FUZZ OR RF_TSAN)
  set(rf_static_cli_default OFF)
else()
  set(rf_static_cli_default ON)
endif()
option(RF_STATIC_CLI "Link the ringfence executable statically (static-pie)"
       ${rf_static_cli_default})
if(RF_STATIC_CLI AND (RF_SANITIZE OR RF_FUZZ OR RF_TSAN))
  message(FATAL_ERROR "RF_STATIC_CLI cannot be combined with a sanitizer build")
endif()

# Which branch a link item takes: the target being linked decides.
set(rf_static_link "$<BOOL:$<TARGET_PROPERTY:RF_STATIC_LINK>>")

# rf_third_party(NAME SHARED items... STATIC archive-names... PACKAGE debian-package)
# NAME links SHARED (targets or files) everywhere but in static targets, which
# get lib<name>.a of each STATIC name instead, in that order.
function(rf_third_party name)
  cmake_parse_arguments(ARG "" "PACKAGE" "SHARED;STATIC" ${ARGN})
  add_library(${name} INTERFACE IMPORTED GLOBAL)
  foreach(item IN LISTS ARG_SHARED)
    target_link_libraries(${name} INTERFACE "$<$<NOT:${rf_static_link}>:${item}>")
  endforeach()
  if(NOT RF_STATIC_CLI)
    return()
  endif()
  foreach(lib IN LISTS ARG_STATIC)
    find_library(RF_STATIC_LIB_${lib} NAMES lib${lib}.a NO_CACHE)
    if(NOT RF_STATIC_LIB_${lib})
      message(FATAL_ERROR "lib${lib}.a not found: install ${ARG_PACKAGE} "
                          "(scripts/install-deps.sh), or configure with -DRF_STATIC_CLI=OFF")
    endif()
    target_link_libraries(${name} INTERFACE "$<${rf_static_link}:${RF_STATIC_LIB_${lib}}>")
  endforeach()
endfunction()

rf_third_party(rf::sqlite3 SHARED SQLite::SQLite3 STATIC sqlite3 PACKAGE "libsqlite3-dev")
rf_third_party(rf::yaml_cpp SHARED yaml-cpp STATIC yaml-cpp PACKAGE "libyaml-cpp-dev")
# libsodium: hashes (and, with identity, secrets). Small tables: cheap to start.
rf_third_party(rf::sodium SHARED PkgConfig::SODIUM STATIC sodium PACKAGE "libsodium-dev")
# OpenSSL is not in the static binary either: TLS to a Docker daemon runs in a
# helper process (src/docker_tls, ringfence-docker-tls). Its provider tables
# alone were 95 of the binary's 111 pages of relocated data, faulted in at every
# start (~0.4 ms of each command).
rf_third_party(rf::openssl SHARED OpenSSL::SSL OpenSSL::Crypto)
# Not in the static binary, by design: libseccomp compiles the seccomp profile
# at build time (src/host/CMakeLists.txt), and libarchive only reads tars, in
# tests (src/docker_api/tar_archive.h; its static archive would pull every
# archive format, libxml2 and ICU in). Code of the CLI that calls either fails
# to link, which says it has come back on the start path.
rf_third_party(rf::seccomp SHARED PkgConfig::SECCOMP)
rf_third_party(rf::archive SHARED PkgConfig::ARCHIVE)

# rf_static_executable(TARGET): TARGET links statically when RF_STATIC_CLI is on.
function(rf_static_executable target)
  if(NOT RF_STATIC_CLI)
    return()
  endif()
  set_target_properties(${target} PROPERTIES RF_STATIC_LINK ON)
  target_compile_definitions(${target} PRIVATE RF_STATIC_CLI=1)
  # glibc warns at link time that getaddrinfo and getpwuid_r need its NSS
  # modules at run time: the binary uses the ones built into libc only.
  # GNU ld, also when lld links the rest: lld 14 cannot pack the relocations.
  target_link_options(${target} PRIVATE -fuse-ld=bfd -static-pie -Wl,-z,pack-relative-relocs)
endfunction()
