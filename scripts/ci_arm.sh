#!/usr/bin/env bash
# Install Debian's bare-metal Arm toolchain and system emulator for the emulated Cortex-M builds
# of the C learner (tests/test_edge_emulation.py, `bimu compute-cost --emulated`):
# gcc-arm-none-eabi, libnewlib-arm-none-eabi (newlib's libc and libm for the cores) and qemu-system-arm
# (boards mps2-an386 = Cortex-M4, mps2-an500 = Cortex-M7).
# Idempotent and quiet: when the three tools are already there it only prints their versions
# (well under a second) and runs no apt-get at all; otherwise one `apt-get update` and one install.
# Must run as root (CI and developer machines are root). Progress goes to stderr.
#
#   bash scripts/ci_arm.sh
set -euo pipefail

log() { echo "ci_arm: $*" >&2; }

newlib_file() {  # prints the path of one of newlib's files for a hard-float Cortex-M4, or nothing
  local f
  f="$(arm-none-eabi-gcc -mthumb -mcpu=cortex-m4 -mfloat-abi=hard -mfpu=fpv4-sp-d16 -print-file-name="$1" 2>/dev/null)"
  [ -f "$f" ] && echo "$f"
}

have_all() {
  command -v arm-none-eabi-gcc >/dev/null 2>&1 &&
    command -v qemu-system-arm >/dev/null 2>&1 &&
    [ -n "$(newlib_file libm.a)" ] && [ -n "$(newlib_file nosys.specs)" ]
}

if ! have_all; then
  if [ "$(id -u)" -ne 0 ]; then
    log "must run as root to install gcc-arm-none-eabi, libnewlib-arm-none-eabi, qemu-system-arm"
    exit 1
  fi
  log "installing gcc-arm-none-eabi, libnewlib-arm-none-eabi, qemu-system-arm from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends \
    gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm >&2
  have_all || { log "installation finished but a tool is still missing"; exit 1; }
fi
log "$(arm-none-eabi-gcc --version | head -n 1)"
log "$(qemu-system-arm --version | head -n 1)"
