#!/usr/bin/env bash
# Builds the one-folder MTP Studio bundle for the OS it runs on, with PyInstaller, and prints the
# path of the bundled executable on its last line.
#
#   bash packaging/build.sh            # after bash packaging/setup.sh (uses ./.venv)
#
# Linux: dist/mtp-studio/ (executable, libraries, resources), a .desktop file and icons beside it,
#        and dist/mtp-studio-<version>-linux-x86_64.tar.gz to hand out.
# macOS: dist/MTP Studio.app and a .dmg (hdiutil); signing and notarisation: packaging/README.md.
# Windows (Git Bash): dist/mtp-studio/mtp-studio.exe; the installer: packaging/windows/mtp-studio.iss.
#
# The bundle runs on other people's machines, so whatever build .venv has, it carries the
# portable llama.cpp (build_plan.sh's PORTABLE_FLAGS: every CPU variant, the best one the CPU
# runs picked at load; with Metal on Apple silicon), built once and cached like set-up's wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=packaging/build_plan.sh
source packaging/build_plan.sh
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=.venv/Scripts/python.exe
if [ ! -x "$PY" ]; then
    echo "build: no Python environment at .venv (nor \$PY); run 'bash packaging/setup.sh' first, or set PY=/path/to/python" >&2
    exit 2
fi
VERSION=$("$PY" -c 'import app; print(app.__version__)')
BUILD=packaging/build
DIST=dist

# the freezer (the bundle extra; the dev extra has it too), installed only where it is missing:
# reinstalling the app rewrites its metadata under every process that reads it meanwhile
"$PY" -c 'import PyInstaller' 2>/dev/null || "$PY" -m pip install --quiet -e ".[bundle]"
"$PY" packaging/make_icons.py "$BUILD/icons" >/dev/null
flags=$PORTABLE_FLAGS
if [ "$(uname -s)" = Darwin ] && [ "$(uname -m)" = arm64 ]; then
    flags="-DGGML_METAL=on $flags"
fi
wheel=$(ensure_wheel "$PY" "$flags")
rm -rf "$BUILD/llama-cpp-portable"
"$PY" -m pip install --quiet --no-deps --target "$BUILD/llama-cpp-portable" "$wheel"
MTP_STUDIO_BUNDLE_LLAMA_CPP="$PWD/$BUILD/llama-cpp-portable" "$PY" -m PyInstaller --noconfirm \
    --clean --log-level WARN --workpath "$BUILD/pyinstaller" --distpath "$DIST" \
    packaging/mtp-studio.spec >&2

case "$(uname -s)" in
Linux)
    folder="$DIST/mtp-studio"
    mkdir -p "$folder/share/icons/hicolor/256x256/apps" "$folder/share/applications"
    cp "$BUILD/icons/mtp-studio-256.png" "$folder/share/icons/hicolor/256x256/apps/mtp-studio.png"
    cp "$BUILD/icons/mtp-studio-256.png" "$folder/mtp-studio.png"
    cp packaging/linux/mtp-studio.desktop "$folder/share/applications/mtp-studio.desktop"
    cp packaging/linux/install-desktop-entry.sh "$folder/"
    tarball="$DIST/mtp-studio-$VERSION-linux-$(uname -m).tar.gz"
    tar -C "$DIST" -czf "$tarball" mtp-studio
    echo "build: $tarball ($(du -sh "$folder" | cut -f1) unpacked)" >&2
    executable="$folder/mtp-studio"
    ;;
Darwin)
    app="$DIST/MTP Studio.app"
    dmg="$DIST/MTP-Studio-$VERSION-macos-$(uname -m).dmg"
    rm -f "$dmg"
    hdiutil create -volname "MTP Studio" -srcfolder "$app" -ov -format UDZO "$dmg" >&2
    echo "build: $dmg" >&2
    executable="$app/Contents/MacOS/mtp-studio"
    ;;
*)
    executable="$DIST/mtp-studio/mtp-studio.exe"
    ;;
esac
echo "$(cd "$(dirname "$executable")" && pwd)/$(basename "$executable")"
