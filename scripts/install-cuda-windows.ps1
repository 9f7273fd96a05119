# Install the parts of a CUDA toolkit needed to compile causal-conv1d on a Windows runner, with
# NVIDIA's silent network installer, before cibuildwheel runs.
#
#   pwsh scripts/install-cuda-windows.ps1 -Cuda 12.8
#   pwsh scripts/install-cuda-windows.ps1 -Cuda 13.0 -SetupMsvc      # also import the MSVC x64 environment
#
# Components (network installer subpackage names, suffixed with _MAJOR.MINOR):
#   nvcc, cudart, thrust (the CCCL headers: CUB / Thrust / libcu++), nvrtc_dev, nvtx,
#   cuda_profiler_api, cublas_dev, cusparse_dev, cusolver_dev (torch's ATen/cuda/CUDAContext.h
#   includes their headers), visual_studio_integration (MSBuild props), cuobjdump (the wheel
#   check reads the embedded CUDA archs with it).
# Pinned: -Cuda selects the minor line and $FullVersion the exact update release installed.
#
# Afterwards CUDA_PATH / CUDA_HOME point at the toolkit and its bin is on PATH -- for this
# shell and, on GitHub Actions, for later steps ($env:GITHUB_ENV / $env:GITHUB_PATH).
# The MSVC environment: on GitHub Actions prefer the runner's `ilammy/msvc-dev-cmd@v1` step
# (arch: x64) before cibuildwheel; -SetupMsvc does the same here with vswhere + vcvars64.bat.
[CmdletBinding()]
param(
    [Parameter(Mandatory = $true)][ValidatePattern('^\d+\.\d+$')][string]$Cuda,
    [switch]$SetupMsvc,
    [string]$DownloadDir = $env:RUNNER_TEMP
)
$ErrorActionPreference = 'Stop'
Set-StrictMode -Version Latest

# The update release installed for each minor line (NVIDIA's archive: cuda/<version>/network_installers/).
$FullVersions = @{
    '11.8' = '11.8.0'; '12.1' = '12.1.1'; '12.4' = '12.4.1'; '12.6' = '12.6.3';
    '12.8' = '12.8.1'; '12.9' = '12.9.1'; '13.0' = '13.0.2'; '13.2' = '13.2.1'
}
if (-not $FullVersions.ContainsKey($Cuda)) {
    throw "CUDA $Cuda is not in this script's table (known: $($FullVersions.Keys -join ', ')); add its update release"
}
$FullVersion = $FullVersions[$Cuda]

$Components = @('nvcc', 'cudart', 'thrust', 'nvrtc_dev', 'nvtx', 'cuda_profiler_api', 'cublas_dev', 'cusparse_dev',
                'cusolver_dev', 'visual_studio_integration', 'cuobjdump')
$Subpackages = $Components | ForEach-Object { "${_}_$Cuda" }

if (-not $DownloadDir) { $DownloadDir = [System.IO.Path]::GetTempPath() }
$Installer = Join-Path $DownloadDir "cuda_${FullVersion}_windows_network.exe"
$Url = "https://developer.download.nvidia.com/compute/cuda/$FullVersion/network_installers/cuda_${FullVersion}_windows_network.exe"
Write-Host "== CUDA $FullVersion network installer: $Url"
for ($i = 1; $i -le 5; $i++) {
    try { Invoke-WebRequest -Uri $Url -OutFile $Installer -UseBasicParsing; break }
    catch { if ($i -eq 5) { throw "cannot download $Url : $_" }; Start-Sleep -Seconds (5 * $i) }
}

Write-Host "== installing: $($Subpackages -join ' ')"
$proc = Start-Process -FilePath $Installer -ArgumentList (@('-s') + $Subpackages + @('-n')) -Wait -PassThru -NoNewWindow
if ($proc.ExitCode -ne 0) { throw "the CUDA installer exited with $($proc.ExitCode)" }

$CudaPath = "C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v$Cuda"
$Nvcc = Join-Path $CudaPath 'bin\nvcc.exe'
if (-not (Test-Path $Nvcc)) { throw "nvcc.exe missing at $Nvcc after the install" }
$version = (& $Nvcc --version | Select-String -Pattern 'release (\d+\.\d+)').Matches[0].Groups[1].Value
if ($version -ne $Cuda) { throw "nvcc reports CUDA $version, expected $Cuda" }

$env:CUDA_PATH = $CudaPath
$env:CUDA_HOME = $CudaPath
$env:PATH = "$CudaPath\bin;$CudaPath\libnvvp;$env:PATH"
if ($env:GITHUB_ENV) {
    "CUDA_PATH=$CudaPath" | Out-File -FilePath $env:GITHUB_ENV -Encoding utf8 -Append
    "CUDA_HOME=$CudaPath" | Out-File -FilePath $env:GITHUB_ENV -Encoding utf8 -Append
    "CUDA_PATH_V$($Cuda.Replace('.', '_'))=$CudaPath" | Out-File -FilePath $env:GITHUB_ENV -Encoding utf8 -Append
}
if ($env:GITHUB_PATH) { "$CudaPath\bin" | Out-File -FilePath $env:GITHUB_PATH -Encoding utf8 -Append }

if ($SetupMsvc) {
    $vswhere = "${env:ProgramFiles(x86)}\Microsoft Visual Studio\Installer\vswhere.exe"
    if (-not (Test-Path $vswhere)) { throw "vswhere.exe not found: install Visual Studio Build Tools (C++ workload)" }
    $vs = & $vswhere -latest -products * -requires Microsoft.VisualStudio.Component.VC.Tools.x86.x64 -property installationPath
    if (-not $vs) { throw "no Visual Studio with the C++ x64 tools found: install the 'Desktop development with C++' workload" }
    $vcvars = Join-Path $vs 'VC\Auxiliary\Build\vcvars64.bat'
    Write-Host "== MSVC environment from $vcvars"
    $lines = cmd.exe /c "`"$vcvars`" >nul && set"
    foreach ($line in $lines) {
        if ($line -match '^([^=]+)=(.*)$') {
            Set-Item -Path "env:$($Matches[1])" -Value $Matches[2]
            if ($env:GITHUB_ENV -and $Matches[1] -in @('PATH', 'INCLUDE', 'LIB', 'LIBPATH', 'VCToolsInstallDir', 'VSINSTALLDIR', 'WindowsSdkDir')) {
                "$($Matches[1])=$($Matches[2])" | Out-File -FilePath $env:GITHUB_ENV -Encoding utf8 -Append
            }
        }
    }
    # torch's build helpers compile with cl.exe through ninja; DISTUTILS_USE_SDK stops setuptools
    # from re-running vcvars over this environment.
    $env:DISTUTILS_USE_SDK = '1'
    if ($env:GITHUB_ENV) { 'DISTUTILS_USE_SDK=1' | Out-File -FilePath $env:GITHUB_ENV -Encoding utf8 -Append }
}
Write-Host "CUDA_PATH=$CudaPath"
