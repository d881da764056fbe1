; Inno Setup script for the Windows installer of MTP Studio.
; Build the bundle first (Git Bash: bash packaging/build.sh), then:
;   iscc /DAppVersion=0.1.0 packaging\windows\mtp-studio.iss
; Output: dist\MTP-Studio-<version>-windows-setup.exe (per-user install, no admin rights needed).

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif

[Setup]
AppId={{6C0F6F1E-7A53-4B8E-9C61-2D3A8F1B5E42}
AppName=MTP Studio
AppVersion={#AppVersion}
AppPublisher=MTP Studio
DefaultDirName={localappdata}\Programs\MTP Studio
DefaultGroupName=MTP Studio
PrivilegesRequired=lowest
OutputDir=..\..\dist
OutputBaseFilename=MTP-Studio-{#AppVersion}-windows-setup
SetupIconFile=..\build\icons\mtp-studio.ico
UninstallDisplayIcon={app}\mtp-studio.exe
Compression=lzma2
SolidCompression=yes
ArchitecturesInstallIn64BitMode=x64compatible

[Files]
Source: "..\..\dist\mtp-studio\*"; DestDir: "{app}"; Flags: recursesubdirs ignoreversion

[Icons]
Name: "{group}\MTP Studio"; Filename: "{app}\mtp-studio.exe"
Name: "{userdesktop}\MTP Studio"; Filename: "{app}\mtp-studio.exe"; Tasks: desktopicon

[Tasks]
Name: "desktopicon"; Description: "Create a desktop shortcut"; Flags: unchecked

[Run]
Filename: "{app}\mtp-studio.exe"; Description: "Start MTP Studio"; Flags: nowait postinstall skipifsilent
