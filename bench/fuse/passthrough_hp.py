"""libfuse's passthrough_hp example, the reference FUSE daemon of the
benchmarks in this folder, built from Debian's fuse3 source package (Debian
12's libfuse 3.14 has neither passthrough nor io_uring), its SHA-256 checked,
into a cache directory on first use."""

import hashlib
import os
import subprocess
import urllib.request

# version: (orig tarball in Debian's archive, its SHA-256, whether the build
# must serve over io_uring, which libfuse has from 3.18).
RELEASES = {
    "3.17.2": ("http://deb.debian.org/debian/pool/main/f/fuse3/fuse3_3.17.2.orig.tar.gz",
               "3d932431ad94e86179e5265cddde1d67aa3bb2fb09a5bd35c641f86f2b5ed06f", False),
    "3.18.3": ("http://deb.debian.org/debian/pool/main/f/fuse3/fuse3_3.18.3.orig.tar.gz",
               "bcd19582c5e30f7fe45dd86a5540e998590aa01903afc7ebcbeea6c8ac5421ee", True),
}


def build(cache, version):
    """The path of passthrough_hp `version`, built in `cache` unless it is
    there already."""
    url, sha256, io_uring = RELEASES[version]
    source = os.path.join(cache, "fuse-" + version)
    binary = os.path.join(source, "build", "example", "passthrough_hp")
    if os.access(binary, os.X_OK):
        return binary
    # meson, and for io_uring what libfuse looks for: liburing with SQE128 and libnuma.
    packages = ["meson"] + (["liburing-dev", "libnuma-dev"] if io_uring else [])
    subprocess.run(["apt-get", "install", "-y", "-q", *packages], check=True,
                   stdout=subprocess.DEVNULL)
    os.makedirs(cache, exist_ok=True)
    with urllib.request.urlopen(url) as response:
        data = response.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise SystemExit("passthrough_hp: %s has SHA-256 %s, not %s" % (url, digest, sha256))
    tarball = os.path.join(cache, os.path.basename(url))
    with open(tarball, "wb") as f:
        f.write(data)
    subprocess.run(["tar", "xzf", tarball, "-C", cache], check=True)
    subprocess.run(["meson", "setup", "build", "-Dexamples=true", "-Dutils=false",
                    "-Dtests=false", "--buildtype=release"], cwd=source, check=True,
                   stdout=subprocess.DEVNULL)
    if io_uring:
        with open(os.path.join(source, "build", "fuse_config.h")) as f:
            if "#define HAVE_URING" not in f.read():
                raise SystemExit("passthrough_hp: libfuse %s was configured without io_uring"
                                 % version)
    subprocess.run(["ninja", "-C", "build", "example/passthrough_hp"], cwd=source, check=True,
                   stdout=subprocess.DEVNULL)
    return binary
