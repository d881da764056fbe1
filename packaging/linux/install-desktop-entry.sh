#!/usr/bin/env bash
# Adds MTP Studio to the desktop's application menu for this user: the .desktop file (pointing at
# this unpacked bundle) and its icon. Run it from the unpacked mtp-studio folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
apps=${XDG_DATA_HOME:-$HOME/.local/share}/applications
icons=${XDG_DATA_HOME:-$HOME/.local/share}/icons/hicolor/256x256/apps
mkdir -p "$apps" "$icons"
cp "$here/mtp-studio.png" "$icons/mtp-studio.png"
sed "s|^Exec=.*|Exec=\"$here/mtp-studio\"|" "$here/share/applications/mtp-studio.desktop" \
    > "$apps/mtp-studio.desktop"
echo "MTP Studio added to the application menu ($apps/mtp-studio.desktop)"
