#!/bin/sh
# tests/vm/run.sh [BUILD_DIR] - memory_mb and processes as a call cgroup's
# memory.max and pids.max, and an OOM kill named in the call's error, on a
# kernel whose cgroup v2 has the memory and pids controllers.
#
# The development and CI machines mount cgroup v2 beside v1 hierarchies that
# hold those controllers, so tests/integration/test_cgroup.py can only check
# the rlimit fallback there. This boots Debian's own kernel in qemu with an
# initramfs of busybox and the build's daemon,
# CLI and test workers, runs the checks in tests/vm/init as PID 1, and reads
# "VMTEST PASS|FAIL name" lines from the serial console. Exit 0 when all
# passed; 77 when it cannot run here (not x86-64).
set -eu
BUILD_DIR=${1:-build}
cd "$(dirname "$0")/../.."
[ "$(uname -m)" = x86_64 ] || { echo "tests/vm: x86-64 only, skipped"; exit 77; }
. ./contrib/deps.sh
TE_EXTRA_PACKAGES="qemu-system-x86 busybox-static cpio" te_install_deps
ninja -C "$BUILD_DIR" daemon/toolexecd daemon/toolexecd-init daemon/cli/toolexec \
    tests/workers/testworker tests/workers/memhog >/dev/null
vm=$BUILD_DIR/vm
mkdir -p "$vm"

# Debian's kernel, unpacked rather than installed (no initramfs hooks run).
kernel=$(ls "$vm"/k/boot/vmlinuz-* 2>/dev/null | head -n 1 || true)
if [ -z "$kernel" ]; then
    pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    (cd "$vm" && apt-get download "$pkg" >/dev/null 2>&1)
    dpkg-deb -x "$vm/$pkg"_*.deb "$vm/k"
    kernel=$(ls "$vm"/k/boot/vmlinuz-* | head -n 1)
fi

# The initramfs: busybox, the binaries, every library they load, the tools.
root=$vm/root
rm -rf "$root"
mkdir -p "$root/bin" "$root/lib64" "$root/lib/x86_64-linux-gnu" "$root/etc" "$root/tools" \
    "$root/proc" "$root/sys" "$root/dev" "$root/tmp"
cp /bin/busybox "$root/bin/"
for b in daemon/toolexecd daemon/toolexecd-init daemon/cli/toolexec tests/workers/testworker \
    tests/workers/memhog; do
    cp "$BUILD_DIR/$b" "$root/bin/"
    ldd "$BUILD_DIR/$b" 2>/dev/null | awk '/=> \// {print $3} /^\t\/lib64/ {print $1}' |
        while read -r lib; do
            case $lib in
            /lib64/*) cp -L "$lib" "$root/lib64/" ;;
            *) cp -L "$lib" "$root/lib/x86_64-linux-gnu/" ;;
            esac
        done
done
printf 'root:x:0:0::/:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
cat > "$root/tools/alloc64.json" <<'J'
{"name": "alloc64", "command": ["/bin/memhog"], "protocol": "plain", "limits": {"memory_mb": 64}}
J
cat > "$root/tools/forks8.json" <<'J'
{"name": "forks8", "command": ["/bin/testworker", "fork-many"], "limits": {"processes": 8}}
J
cat > "$root/tools/sg.json" <<'J'
{"name": "sg", "command": ["/bin/testworker", "setsid-grandchild"], "timeout_ms": 60000}
J
cp tests/vm/init "$root/init"
chmod 755 "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$vm/initrd.gz"

# Software emulation (the whole script: 27-30 s on 2 shared CPUs): the
# development machine is itself a VM, and qemu under its nested KVM either
# aborted (-cpu host: an MSR it cannot set) or hung.
timeout 300 qemu-system-x86_64 -accel tcg -m 1024 -smp 2 -nographic -no-reboot \
    -kernel "$kernel" -initrd "$vm/initrd.gz" \
    -append "console=ttyS0 panic=-1 quiet rdinit=/init" </dev/null >"$vm/console.log" 2>&1 || true
grep -a "VMTEST" "$vm/console.log" || true
pass=$(grep -ac "^VMTEST PASS" "$vm/console.log" || true)
fail=$(grep -ac "^VMTEST FAIL" "$vm/console.log" || true)
if ! grep -aq "^VMTEST END" "$vm/console.log" || [ "$fail" -ne 0 ] || [ "$pass" -eq 0 ]; then
    echo "tests/vm: $pass passed, $fail failed; console: $vm/console.log" >&2
    tail -n 40 "$vm/console.log" >&2
    exit 1
fi
echo "tests/vm: $pass passed"
