// Package ortinstall installs the official ONNX Runtime build into the user
// cache folder, where ort.Load finds it: it downloads the library with
// `npm pack` or from the GitHub release, checks it, and moves it into place
// atomically. It is kept apart from package ort so that programs that only
// load and run ONNX Runtime do not link a downloader.
package ortinstall

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/conditionhq/condition/internal/ort"
)

// DefaultReleaseURL is where the GitHub release tarballs live:
// <DefaultReleaseURL>/v<version>/onnxruntime-<platform>-<version>.tgz.
const DefaultReleaseURL = "https://github.com/microsoft/onnxruntime/releases/download"

// The sources of a library, as InstallResult.Source names them.
const (
	FromNPM    = "npm"
	FromGitHub = "github"
)

// pinnedSHA256 holds the sha256 of the library inside the official
// onnxruntime-node npm package, by "<version>/<GOOS>/<GOARCH>". The npm
// registry checks the tarball's own integrity; this checks the file we keep.
var pinnedSHA256 = map[string]string{
	"1.30.0/linux/amd64":  "ffb75a925ba05e47b235bb66e3e3911714a80b328a9c9425539feb204aa32a23",
	"1.30.0/linux/arm64":  "1f549d46250b005580b597f4164984aaf75b3bcb9f3aeb07c7f8a8fe60b23c76",
	"1.30.0/darwin/arm64": "685d2be5dba1309c89d3a5324b7fd06a5c42f1a61bfea32d14c4cc28d072121d",
}

// InstallOptions controls Install.
type InstallOptions struct {
	Version  string // default ort.InstallVersion
	CacheDir string // default ort.DefaultCacheDir()
	Force    bool   // reinstall even when the version is already installed

	// NPM is the npm executable; empty means look it up on PATH. With
	// NoNPM, or when npm is not found, Install downloads the GitHub release.
	NPM   string
	NoNPM bool

	ReleaseURL string       // default DefaultReleaseURL
	Client     *http.Client // default http.DefaultClient

	// Progress, when set, is called as a download advances (total is -1
	// when unknown). It is not called for npm, which reports nothing.
	Progress func(done, total int64)
	// Logger receives Info lines as the install advances and Warn lines
	// when it falls back or repairs a broken install. Nil means nothing is
	// logged.
	Logger *slog.Logger
}

// InstallResult says what Install did.
type InstallResult struct {
	Path             string `json:"path"`    // the installed library file
	Version          string `json:"version"` // as the library reports it
	Source           string `json:"source"`  // FromNPM or FromGitHub
	URL              string `json:"url"`     // the package spec or URL downloaded
	SHA256           string `json:"sha256"`
	Size             int64  `json:"size"`
	AlreadyInstalled bool   `json:"already_installed"`
}

// manifest is INSTALL.json.
type manifest struct {
	Version     string `json:"version"`
	Source      string `json:"source"`
	URL         string `json:"url"`
	SHA256      string `json:"sha256"`
	Size        int64  `json:"size"`
	GOOS        string `json:"goos"`
	GOARCH      string `json:"goarch"`
	InstalledAt string `json:"installed_at"`
}

// platform names the files of one GOOS/GOARCH in the official packages.
type platform struct {
	npmMember string // path inside the npm tarball
	ghTarball string // GitHub release asset name
	ghMember  string // library path inside it, after the top folder
}

func platformFor(goos, goarch, version string) (platform, error) {
	switch goos + "/" + goarch {
	case "linux/amd64":
		return platform{"package/bin/napi-v6/linux/x64/libonnxruntime.so.1",
			"onnxruntime-linux-x64-" + version + ".tgz", "lib/libonnxruntime.so." + version}, nil
	case "linux/arm64":
		return platform{"package/bin/napi-v6/linux/arm64/libonnxruntime.so.1",
			"onnxruntime-linux-aarch64-" + version + ".tgz", "lib/libonnxruntime.so." + version}, nil
	case "darwin/arm64":
		return platform{"package/bin/napi-v6/darwin/arm64/libonnxruntime." + version + ".dylib",
			"onnxruntime-osx-arm64-" + version + ".tgz", "lib/libonnxruntime." + version + ".dylib"}, nil
	case "darwin/amd64":
		return platform{"", "onnxruntime-osx-x86_64-" + version + ".tgz", "lib/libonnxruntime." + version + ".dylib"}, nil
	}
	return platform{}, fmt.Errorf("ortinstall: no official ONNX Runtime build for %s/%s; build or install it yourself and name its path", goos, goarch)
}

// Install installs the official ONNX Runtime build into the user cache folder
// (<CacheDir>/<version>/libonnxruntime.so.1 plus INSTALL.json). It gets the
// library with `npm pack onnxruntime-node@<version>` (which runs no package
// scripts) when npm is on the PATH, otherwise (or when npm fails to fetch it)
// from the GitHub release tarball.
// It checks the archive end to end, that the library is a shared library for
// this machine (and, from npm, its pinned sha256), and that it loads and
// reports the expected version; then it moves the finished folder into place
// with one rename, so the cache never holds half a file. Installing a version
// already there returns at once with AlreadyInstalled set, unless Force.
func Install(ctx context.Context, opts InstallOptions) (*InstallResult, error) {
	if opts.Version == "" {
		opts.Version = ort.InstallVersion
	}
	if _, err := ort.ParseVersion(opts.Version); err != nil {
		return nil, fmt.Errorf("ortinstall: %q is not a version like %s", opts.Version, ort.InstallVersion)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	root := opts.CacheDir
	if root == "" {
		var err error
		if root, err = ort.DefaultCacheDir(); err != nil {
			return nil, fmt.Errorf("ortinstall: %w", err)
		}
	}
	plat, err := platformFor(runtime.GOOS, runtime.GOARCH, opts.Version)
	if err != nil {
		return nil, err
	}
	dest := filepath.Join(root, opts.Version)
	if !opts.Force {
		if r, err := checkInstalled(dest, opts.Version); err == nil {
			return r, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			log.Warn("onnxruntime: existing install is broken; reinstalling", "dir", dest, "err", err)
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("ortinstall: %w", err)
	}
	staging, err := os.MkdirTemp(root, ".staging-"+opts.Version+"-")
	if err != nil {
		return nil, fmt.Errorf("ortinstall: %w", err)
	}
	defer os.RemoveAll(staging)
	if err := os.Chmod(staging, 0o755); err != nil {
		return nil, fmt.Errorf("ortinstall: %w", err)
	}
	libPath := filepath.Join(staging, ort.InstalledLibName())

	npm := ""
	if !opts.NoNPM && plat.npmMember != "" {
		npm = opts.NPM
		if npm == "" {
			npm, _ = exec.LookPath("npm")
		}
	}
	m := manifest{Version: opts.Version, GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
	var npmErr error
	if npm != "" {
		m.Source, m.URL = FromNPM, "onnxruntime-node@"+opts.Version
		log.Info("onnxruntime: downloading with npm pack", "package", m.URL)
		m.SHA256, m.Size, err = fetchNPM(ctx, npm, m.URL, staging, plat.npmMember, libPath)
		if err != nil && ctx.Err() == nil {
			// npm could not fetch the package (offline registry, proxy...): try GitHub.
			log.Warn("onnxruntime: npm pack failed; trying the GitHub release", "err", err)
			npmErr, npm = err, ""
			os.Remove(libPath)
		}
	}
	if npm == "" {
		base := opts.ReleaseURL
		if base == "" {
			base = DefaultReleaseURL
		}
		m.Source = FromGitHub
		m.URL = strings.TrimRight(base, "/") + "/v" + opts.Version + "/" + plat.ghTarball
		log.Info("onnxruntime: downloading release tarball", "url", m.URL)
		m.SHA256, m.Size, err = fetchHTTP(ctx, opts, m.URL, plat.ghMember, libPath)
		if err != nil && npmErr != nil {
			err = fmt.Errorf("%w; before that, %v", err, npmErr)
		}
	}
	if err != nil {
		return nil, err
	}
	if m.Source == FromNPM {
		if want, ok := pinnedSHA256[opts.Version+"/"+runtime.GOOS+"/"+runtime.GOARCH]; ok && want != m.SHA256 {
			return nil, fmt.Errorf("ortinstall: %s from %s has sha256 %s, expected %s", path.Base(plat.npmMember), m.URL, m.SHA256, want)
		}
	}
	if err := checkBinary(libPath); err != nil {
		return nil, fmt.Errorf("ortinstall: %s from %s: %w", path.Base(plat.npmMember+plat.ghMember), m.URL, err)
	}
	ver, err := ort.Probe(libPath)
	if err != nil {
		return nil, fmt.Errorf("ortinstall: the downloaded library does not load: %w", err)
	}
	if err := checkVersion(ver); err != nil {
		return nil, fmt.Errorf("ortinstall: the downloaded library %w", err)
	}
	if ver != opts.Version {
		return nil, fmt.Errorf("ortinstall: asked for ONNX Runtime %s, the downloaded library reports %s", opts.Version, ver)
	}
	m.InstalledAt = time.Now().UTC().Format(time.RFC3339)
	mj, _ := json.MarshalIndent(m, "", "  ")
	if err := writeSynced(filepath.Join(staging, ort.ManifestName), append(mj, '\n')); err != nil {
		return nil, fmt.Errorf("ortinstall: %w", err)
	}
	if err := syncDir(staging); err != nil {
		return nil, fmt.Errorf("ortinstall: %w", err)
	}
	if err := replaceDir(staging, dest, root); err != nil {
		// Another process may have finished the same install first.
		if r, err2 := checkInstalled(dest, opts.Version); err2 == nil && !opts.Force {
			return r, nil
		}
		return nil, fmt.Errorf("ortinstall: %w", err)
	}
	_ = syncDir(root)
	log.Info("onnxruntime: installed", "version", ver, "path", filepath.Join(dest, ort.InstalledLibName()))
	return &InstallResult{Path: filepath.Join(dest, ort.InstalledLibName()), Version: ver, Source: m.Source,
		URL: m.URL, SHA256: m.SHA256, Size: m.Size}, nil
}

// checkInstalled reports an existing install of version in dir (quickly: its
// manifest, the file size and the binary header; no hashing, no loading).
// The error wraps os.ErrNotExist when nothing is installed there.
func checkInstalled(dir, version string) (*InstallResult, error) {
	lib := filepath.Join(dir, ort.InstalledLibName())
	b, err := os.ReadFile(filepath.Join(dir, ort.ManifestName))
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ort.ManifestName), err)
	}
	if m.Version != version {
		return nil, fmt.Errorf("%s: version %q, expected %q", filepath.Join(dir, ort.ManifestName), m.Version, version)
	}
	fi, err := os.Stat(lib)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", lib, err) // %v: a manifest without its library is broken, not absent
	}
	if fi.Size() != m.Size {
		return nil, fmt.Errorf("%s: size %d, manifest says %d", lib, fi.Size(), m.Size)
	}
	if err := checkBinary(lib); err != nil {
		return nil, fmt.Errorf("%s: %w", lib, err)
	}
	return &InstallResult{Path: lib, Version: m.Version, Source: m.Source, URL: m.URL, SHA256: m.SHA256,
		Size: m.Size, AlreadyInstalled: true}, nil
}

// fetchNPM runs `npm pack <spec>` in a temporary folder inside dir and
// extracts member from the tarball it downloads into dst.
func fetchNPM(ctx context.Context, npm, spec, dir, member, dst string) (string, int64, error) {
	tmp, err := os.MkdirTemp(dir, ".npm-")
	if err != nil {
		return "", 0, fmt.Errorf("ortinstall: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, npm, "pack", spec, "--ignore-scripts", "--silent", "--pack-destination", tmp)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", 0, ctx.Err()
		}
		return "", 0, fmt.Errorf("ortinstall: npm pack %s: %w: %s", spec, err, strings.TrimSpace(stderr.String()))
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return "", 0, fmt.Errorf("ortinstall: %w", err)
	}
	var tgz string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tgz") {
			tgz = filepath.Join(tmp, e.Name())
		}
	}
	if tgz == "" {
		return "", 0, fmt.Errorf("ortinstall: npm pack %s wrote no .tgz (stdout %q)", spec, strings.TrimSpace(stdout.String()))
	}
	f, err := os.Open(tgz)
	if err != nil {
		return "", 0, fmt.Errorf("ortinstall: %w", err)
	}
	defer f.Close()
	sum, n, err := extractMember(ctx, f, member, false, dst)
	if err != nil {
		return "", 0, fmt.Errorf("ortinstall: %s from npm pack %s: %w", filepath.Base(tgz), spec, err)
	}
	return sum, n, nil
}

// fetchHTTP downloads a release tarball and extracts member (a path below
// the tarball's top folder) into dst.
func fetchHTTP(ctx context.Context, opts InstallOptions, url, member, dst string) (string, int64, error) {
	client := opts.Client
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, fmt.Errorf("ortinstall: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", 0, ctx.Err()
		}
		return "", 0, fmt.Errorf("ortinstall: download %s: %w (without internet access, put libonnxruntime in place yourself and name its path)", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("ortinstall: download %s: %s", url, resp.Status)
	}
	var body io.Reader = resp.Body
	if opts.Progress != nil {
		body = &progressReader{r: resp.Body, total: resp.ContentLength, fn: opts.Progress}
	}
	sum, n, err := extractMember(ctx, body, member, true, dst)
	if err != nil {
		if ctx.Err() != nil {
			return "", 0, ctx.Err()
		}
		return "", 0, fmt.Errorf("ortinstall: %s: %w", url, err)
	}
	return sum, n, nil
}

type progressReader struct {
	r     io.Reader
	done  int64
	total int64
	fn    func(done, total int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.done += int64(n)
	p.fn(p.done, p.total)
	return n, err
}

// extractMember reads the whole gzip'd tar archive r (so that a damaged or
// truncated archive is an error), writing the regular file named member to
// dst (synced) and returning its sha256 and size. With belowTop, member is
// matched below any single top-level folder ("onnxruntime-linux-x64-1.30.0/").
func extractMember(ctx context.Context, r io.Reader, member string, belowTop bool, dst string) (string, int64, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return "", 0, fmt.Errorf("not a gzip'd tar archive: %w", err)
	}
	tr := tar.NewReader(zr)
	var (
		sum   string
		size  int64
		found bool
	)
	for {
		if err := ctx.Err(); err != nil {
			return "", 0, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", 0, fmt.Errorf("damaged archive: %w", err)
		}
		name := strings.TrimPrefix(path.Clean(h.Name), "./")
		if belowTop {
			if i := strings.IndexByte(name, '/'); i >= 0 {
				name = name[i+1:]
			}
		}
		if name != member || found {
			if _, err := io.Copy(io.Discard, tr); err != nil {
				return "", 0, fmt.Errorf("damaged archive at %s: %w", h.Name, err)
			}
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return "", 0, fmt.Errorf("%s in the archive is not a regular file", h.Name)
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
		if err != nil {
			return "", 0, err
		}
		hs := sha256.New()
		n, err := io.Copy(io.MultiWriter(f, hs), tr)
		if err == nil && n != h.Size {
			err = fmt.Errorf("%s: read %d of %d bytes", h.Name, n, h.Size)
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", 0, fmt.Errorf("damaged archive at %s: %w", h.Name, err)
		}
		sum, size, found = hex.EncodeToString(hs.Sum(nil)), n, true
	}
	if _, err := io.Copy(io.Discard, zr); err != nil { // gzip trailer: checksum and length
		return "", 0, fmt.Errorf("damaged archive: %w", err)
	}
	if !found {
		return "", 0, fmt.Errorf("the archive has no %s", member)
	}
	return sum, size, nil
}

// checkBinary checks that path is a shared library for this machine.
func checkBinary(p string) error {
	switch runtime.GOOS {
	case "linux":
		// The ELF header is enough: the dynamic loader checks the rest.
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		var h [20]byte
		if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:4]) != elf.ELFMAG {
			return errors.New("not an ELF shared library")
		}
		class, data := elf.Class(h[elf.EI_CLASS]), elf.Data(h[elf.EI_DATA])
		if class != elf.ELFCLASS64 || data != elf.ELFDATA2LSB {
			return fmt.Errorf("ELF file of class %s, %s; this machine needs 64-bit little-endian", class, data)
		}
		typ, mach := elf.Type(binary.LittleEndian.Uint16(h[16:])), elf.Machine(binary.LittleEndian.Uint16(h[18:]))
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
		if want != 0 && mach != want {
			return fmt.Errorf("ELF file for %s, this machine is %s", mach, runtime.GOARCH)
		}
		if typ != elf.ET_DYN {
			return fmt.Errorf("ELF file of type %s, not a shared library", typ)
		}
	case "darwin":
		f, err := macho.Open(p)
		if err != nil {
			return fmt.Errorf("not a Mach-O library: %w", err)
		}
		defer f.Close()
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[runtime.GOARCH]
		if f.Cpu != want {
			return fmt.Errorf("Mach-O file for %s, this machine is %s", f.Cpu, runtime.GOARCH)
		}
		if f.Type != macho.TypeDylib {
			return fmt.Errorf("Mach-O file of type %s, not a dylib", f.Type)
		}
	}
	return nil
}

// replaceDir moves the finished staging folder to dest, replacing what is
// there (moved aside first and removed after, restored on failure).
func replaceDir(staging, dest, root string) error {
	if _, err := os.Lstat(dest); err == nil {
		old, err := os.MkdirTemp(root, ".old-")
		if err != nil {
			return err
		}
		oldDest := filepath.Join(old, "v")
		if err := os.Rename(dest, oldDest); err != nil {
			os.RemoveAll(old)
			return err
		}
		if err := os.Rename(staging, dest); err != nil {
			_ = os.Rename(oldDest, dest)
			os.RemoveAll(old)
			return err
		}
		return os.RemoveAll(old)
	}
	return os.Rename(staging, dest)
}

func writeSynced(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(d string) error {
	f, err := os.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// checkVersion checks that ver is a version number no older than ort.MinVersion.
func checkVersion(ver string) error {
	v, err := ort.ParseVersion(ver)
	if err != nil {
		return fmt.Errorf("reports version %q, which is not a version number", ver)
	}
	min, _ := ort.ParseVersion(ort.MinVersion)
	if ort.CompareVersions(v, min) < 0 {
		return fmt.Errorf("version %s is older than %s", ver, ort.MinVersion)
	}
	return nil
}
