// Package sandbox maps the paths a simulated machine sees onto one real directory, so that a
// command sent to the lab simulator — `rm -rf /`, `cat ../../../etc/passwd`, a symlink to `/`
// — can only ever read or write inside that machine's own directory.
//
// Every path given to an FS is a virtual absolute path inside the machine. Symbolic links are
// resolved here with chroot semantics (an absolute target starts again at the machine's root,
// `..` stops at the root), and the final operation goes through an os.Root, which refuses any
// escape the kernel would otherwise follow, so even a race that swaps a directory for a symlink
// cannot leave the directory. A small read-only synthetic tree (/proc) is served from
// generators instead of the disk so that its figures change between reads.
package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
)

// maxSymlinkHops bounds symlink resolution as the kernel does (ELOOP after 40).
const maxSymlinkHops = 40

// Generator produces the current content of a synthetic file.
type Generator func() []byte

// File is an open file of the sandbox: a real *os.File or a synthetic read-only file.
type File interface {
	io.Reader
	io.Writer
	io.Closer
	Stat() (fs.FileInfo, error)
}

// FS is one machine's file system: virtual absolute paths mapped under a real directory.
// It is safe for concurrent use.
type FS struct {
	root  *os.Root
	dir   string
	synth map[string]Generator // absolute virtual path → generator
	dirs  map[string]bool      // synthetic directories (parents of synth files)
}

// New opens (creating if needed) the real directory dir as a machine's root. synth maps
// absolute virtual paths such as "/proc/loadavg" to generators; their parent directories
// become synthetic, read-only directories that hide anything on disk at the same place.
func New(dir string, synth map[string]Generator) (*FS, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: create %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: open root %s: %w", dir, err)
	}
	f := &FS{root: root, dir: dir, synth: map[string]Generator{}, dirs: map[string]bool{}}
	for p, g := range synth {
		p = path.Clean("/" + p)
		f.synth[p] = g
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			f.dirs[d] = true
		}
	}
	return f, nil
}

// Close releases the root directory handle.
func (f *FS) Close() error { return f.root.Close() }

// RealDir is the real directory holding this machine's files (for tests and cleanup only;
// never hand it to guest commands).
func (f *FS) RealDir() string { return f.dir }

// ErrEscape is the error behind a path that would leave the sandbox; callers see it as
// "Permission denied".
var ErrEscape = errors.New("path escapes the sandbox")

// Clean turns name into a clean absolute virtual path, joining a relative name onto cwd.
func Clean(cwd, name string) string {
	if !strings.HasPrefix(name, "/") {
		if cwd == "" {
			cwd = "/"
		}
		name = cwd + "/" + name
	}
	return path.Clean(name)
}

func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// synthetic reports whether the clean virtual path p lies in the synthetic tree.
func (f *FS) synthetic(p string) bool {
	if _, ok := f.synth[p]; ok {
		return true
	}
	if f.dirs[p] {
		return true
	}
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		if f.dirs[d] {
			return true
		}
	}
	return false
}

// resolve maps a virtual path to a path relative to the real root with every symlink in it
// resolved inside the sandbox. followLast says whether a symlink in the final component is
// followed. The second result is the resolved virtual path.
func (f *FS) resolve(name string, followLast bool) (rel string, virt string, err error) {
	parts := splitPath(path.Clean("/" + name))
	var out []string
	hops := 0
	for len(parts) > 0 {
		c := parts[0]
		parts = parts[1:]
		if c == ".." {
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			continue
		}
		out = append(out, c)
		if len(parts) == 0 && !followLast {
			break
		}
		cur := "/" + strings.Join(out, "/")
		if f.synthetic(cur) {
			continue
		}
		fi, lerr := f.root.Lstat(strings.Join(out, "/"))
		if lerr != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		hops++
		if hops > maxSymlinkHops {
			return "", "", syscall.ELOOP
		}
		target, rerr := f.root.Readlink(strings.Join(out, "/"))
		if rerr != nil {
			return "", "", unwrap(rerr)
		}
		out = out[:len(out)-1]
		if strings.HasPrefix(target, "/") {
			out = out[:0]
		}
		// ".." components of the target stay in parts and are popped above, never
		// climbing past the sandbox root.
		parts = append(splitPath(target), parts...)
	}
	if len(out) == 0 {
		return ".", "/", nil
	}
	return strings.Join(out, "/"), "/" + strings.Join(out, "/"), nil
}

// unwrap strips real paths from errors so guest commands never see the host's layout.
func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES
	}
	if strings.Contains(err.Error(), "escapes") {
		return ErrEscape
	}
	return err
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: unwrap(err)}
}

// Describe renders an error as coreutils do after "name: ", e.g. "No such file or directory".
func Describe(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOENT:
			return "No such file or directory"
		case syscall.EEXIST:
			return "File exists"
		case syscall.EACCES:
			return "Permission denied"
		case syscall.EPERM:
			return "Operation not permitted"
		case syscall.ENOTDIR:
			return "Not a directory"
		case syscall.EISDIR:
			return "Is a directory"
		case syscall.ENOTEMPTY:
			return "Directory not empty"
		case syscall.ELOOP:
			return "Too many levels of symbolic links"
		case syscall.EINVAL:
			return "Invalid argument"
		case syscall.EROFS:
			return "Read-only file system"
		}
		s := errno.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	if errors.Is(err, ErrEscape) {
		return "Permission denied"
	}
	return err.Error()
}

// OpenFile opens the virtual path name with os.OpenFile semantics.
func (f *FS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	name = path.Clean("/" + name)
	rel, virt, err := f.resolve(name, true)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if f.synthetic(virt) {
		if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
			return nil, pathErr("open", name, syscall.EACCES)
		}
		if g, ok := f.synth[virt]; ok {
			return &synthFile{Reader: bytes.NewReader(g()), info: synthInfo{name: path.Base(virt)}}, nil
		}
		if !f.dirs[virt] {
			return nil, pathErr("open", name, syscall.ENOENT)
		}
		return &synthFile{Reader: bytes.NewReader(nil), info: synthInfo{name: path.Base(virt), dir: true}}, nil
	}
	file, err := f.root.OpenFile(rel, flag, perm)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	return file, nil
}

// Open opens name for reading.
func (f *FS) Open(name string) (File, error) { return f.OpenFile(name, os.O_RDONLY, 0) }

// ReadFile reads the whole file at name.
func (f *FS) ReadFile(name string) ([]byte, error) {
	file, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	if fi, err := file.Stat(); err == nil && fi.IsDir() {
		return nil, pathErr("read", name, syscall.EISDIR)
	}
	data, err := io.ReadAll(file)
	if err != nil {
		return nil, pathErr("read", name, err)
	}
	return data, nil
}

// WriteFile writes data to name, creating or truncating it.
func (f *FS) WriteFile(name string, data []byte, perm fs.FileMode) error {
	file, err := f.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := file.Write(data); err != nil {
		file.Close()
		return pathErr("write", name, err)
	}
	if err := file.Close(); err != nil {
		return pathErr("close", name, err)
	}
	return nil
}

// Stat describes name, following a final symlink.
func (f *FS) Stat(name string) (fs.FileInfo, error) { return f.stat(name, true) }

// Lstat describes name without following a final symlink.
func (f *FS) Lstat(name string) (fs.FileInfo, error) { return f.stat(name, false) }

func (f *FS) stat(name string, follow bool) (fs.FileInfo, error) {
	name = path.Clean("/" + name)
	rel, virt, err := f.resolve(name, follow)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	if f.synthetic(virt) {
		if _, ok := f.synth[virt]; ok {
			return synthInfo{name: path.Base(virt), size: int64(len(f.synth[virt]()))}, nil
		}
		if f.dirs[virt] {
			return synthInfo{name: path.Base(virt), dir: true}, nil
		}
		return nil, pathErr("stat", name, syscall.ENOENT)
	}
	var fi fs.FileInfo
	if follow {
		fi, err = f.root.Stat(rel)
	} else {
		fi, err = f.root.Lstat(rel)
	}
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	if virt == "/" {
		return renamed{FileInfo: fi, name: "/"}, nil
	}
	return fi, nil
}

// ReadDir lists the directory name sorted by file name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	name = path.Clean("/" + name)
	rel, virt, err := f.resolve(name, true)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	var entries []fs.DirEntry
	if f.synthetic(virt) {
		if !f.dirs[virt] {
			if _, ok := f.synth[virt]; ok {
				return nil, pathErr("readdirent", name, syscall.ENOTDIR)
			}
			return nil, pathErr("open", name, syscall.ENOENT)
		}
	} else {
		dir, err := f.root.Open(rel)
		if err != nil {
			return nil, pathErr("open", name, err)
		}
		entries, err = dir.ReadDir(-1)
		dir.Close()
		if err != nil {
			return nil, pathErr("readdirent", name, err)
		}
	}
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.Name()] = true
	}
	// Synthetic children of this directory hide real entries of the same name.
	add := func(child string, dir bool) {
		base := path.Base(child)
		if path.Dir(child) != virt {
			return
		}
		info := synthInfo{name: base, dir: dir}
		if seen[base] {
			for i, e := range entries {
				if e.Name() == base {
					entries[i] = fs.FileInfoToDirEntry(info)
				}
			}
			return
		}
		seen[base] = true
		entries = append(entries, fs.FileInfoToDirEntry(info))
	}
	for d := range f.dirs {
		add(d, true)
	}
	for p := range f.synth {
		add(p, false)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// onDisk resolves name (already cleaned) for op on what the machine may change: its path
// under the root ("." for the machine's root directory itself). resolve's errors and a
// synthetic name (refused with synthErr) come back as *fs.PathError for op and name.
func (f *FS) onDisk(op, name string, follow bool, synthErr error) (string, error) {
	rel, virt, err := f.resolve(name, follow)
	if err != nil {
		return "", pathErr(op, name, err)
	}
	if f.synthetic(virt) {
		return "", pathErr(op, name, synthErr)
	}
	return rel, nil
}

// onDiskPair is onDisk for the two names of rename and link: both resolve first, then a
// synthetic name on either side is refused as oldname's (EPERM).
func (f *FS) onDiskPair(op, oldname, newname string, followOld bool) (orel, nrel string, err error) {
	orel, ovirt, err := f.resolve(oldname, followOld)
	if err != nil {
		return "", "", pathErr(op, oldname, err)
	}
	nrel, nvirt, err := f.resolve(newname, false)
	if err != nil {
		return "", "", pathErr(op, newname, err)
	}
	if f.synthetic(ovirt) || f.synthetic(nvirt) {
		return "", "", pathErr(op, oldname, syscall.EPERM)
	}
	return orel, nrel, nil
}

// opErr is the error of the final operation op on name: nil, or a *fs.PathError.
func opErr(op, name string, err error) error {
	if err != nil {
		return pathErr(op, name, err)
	}
	return nil
}

// Mkdir creates one directory.
func (f *FS) Mkdir(name string, perm fs.FileMode) error {
	name = path.Clean("/" + name)
	rel, virt, err := f.resolve(name, false)
	if err != nil {
		return pathErr("mkdir", name, err)
	}
	if f.synthetic(virt) {
		if f.dirs[virt] {
			return pathErr("mkdir", name, syscall.EEXIST)
		}
		return pathErr("mkdir", name, syscall.EACCES)
	}
	if rel == "." {
		return pathErr("mkdir", name, syscall.EEXIST)
	}
	return opErr("mkdir", name, f.root.Mkdir(rel, perm))
}

// MkdirAll creates name and any missing parents.
func (f *FS) MkdirAll(name string, perm fs.FileMode) error {
	name = path.Clean("/" + name)
	parts := splitPath(name)
	cur := ""
	for _, c := range parts {
		cur += "/" + c
		fi, err := f.Stat(cur)
		if err == nil {
			if !fi.IsDir() {
				return pathErr("mkdir", cur, syscall.ENOTDIR)
			}
			continue
		}
		if err := f.Mkdir(cur, perm); err != nil && !errors.Is(err, syscall.EEXIST) {
			return err
		}
	}
	return nil
}

// Remove removes a file or an empty directory (a final symlink itself, not its target).
func (f *FS) Remove(name string) error {
	name = path.Clean("/" + name)
	rel, err := f.onDisk("remove", name, false, syscall.EPERM)
	if err != nil {
		return err
	}
	if rel == "." {
		return pathErr("remove", name, syscall.EBUSY)
	}
	return opErr("remove", name, f.root.Remove(rel))
}

// RemoveAll removes name and everything below it. Removing "/" empties the machine's own
// directory (the directory itself stays, as a root file system would) and leaves the
// synthetic tree in place, like the kernel's /proc.
func (f *FS) RemoveAll(name string) error {
	name = path.Clean("/" + name)
	rel, err := f.onDisk("remove", name, false, syscall.EPERM)
	if err != nil {
		return err
	}
	if rel != "." {
		return opErr("remove", name, f.root.RemoveAll(rel))
	}
	dir, err := f.root.Open(".")
	if err != nil {
		return pathErr("remove", name, err)
	}
	entries, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return pathErr("remove", name, err)
	}
	var first error
	for _, e := range entries {
		if err := f.root.RemoveAll(e.Name()); err != nil && first == nil {
			first = pathErr("remove", "/"+e.Name(), err)
		}
	}
	return first
}

// Rename moves oldname to newname.
func (f *FS) Rename(oldname, newname string) error {
	oldname, newname = path.Clean("/"+oldname), path.Clean("/"+newname)
	orel, nrel, err := f.onDiskPair("rename", oldname, newname, false)
	if err != nil {
		return err
	}
	if orel == "." || nrel == "." {
		return pathErr("rename", oldname, syscall.EBUSY)
	}
	return opErr("rename", oldname, f.root.Rename(orel, nrel))
}

// Symlink creates link pointing at target. The target is stored as given; it is interpreted
// inside the sandbox whenever the link is followed.
func (f *FS) Symlink(target, link string) error {
	link = path.Clean("/" + link)
	rel, err := f.onDisk("symlink", link, false, syscall.EPERM)
	if err != nil {
		return err
	}
	if rel == "." {
		return pathErr("symlink", link, syscall.EEXIST)
	}
	if _, err := f.root.Lstat(rel); err == nil {
		return pathErr("symlink", link, syscall.EEXIST)
	}
	// The target is stored raw (os.Root does not validate it); it is only ever
	// interpreted by resolve, inside the sandbox.
	return opErr("symlink", link, f.root.Symlink(target, rel))
}

// Link creates newname as a hard link to oldname.
func (f *FS) Link(oldname, newname string) error {
	oldname, newname = path.Clean("/"+oldname), path.Clean("/"+newname)
	orel, nrel, err := f.onDiskPair("link", oldname, newname, true)
	if err != nil {
		return err
	}
	return opErr("link", oldname, f.root.Link(orel, nrel))
}

// Readlink returns the stored target of the symlink name.
func (f *FS) Readlink(name string) (string, error) {
	name = path.Clean("/" + name)
	rel, err := f.onDisk("readlink", name, false, syscall.EINVAL)
	if err != nil {
		return "", err
	}
	t, err := f.root.Readlink(rel)
	return t, opErr("readlink", name, err)
}

// Chtimes sets access and modification times.
func (f *FS) Chtimes(name string, atime, mtime time.Time) error {
	name = path.Clean("/" + name)
	rel, err := f.onDisk("utimes", name, true, syscall.EPERM)
	if err != nil {
		return err
	}
	return opErr("utimes", name, f.root.Chtimes(rel, atime, mtime))
}

// Chmod changes the mode bits of name.
func (f *FS) Chmod(name string, mode fs.FileMode) error {
	name = path.Clean("/" + name)
	rel, err := f.onDisk("chmod", name, true, syscall.EPERM)
	if err != nil {
		return err
	}
	return opErr("chmod", name, f.root.Chmod(rel, mode))
}

type synthFile struct {
	*bytes.Reader
	info synthInfo
}

func (s *synthFile) Write([]byte) (int, error)  { return 0, syscall.EBADF }
func (s *synthFile) Close() error               { return nil }
func (s *synthFile) Stat() (fs.FileInfo, error) { return s.info, nil }

// synthInfo describes a synthetic file: read-only, owned by root, timestamped now.
type synthInfo struct {
	name string
	size int64
	dir  bool
}

func (s synthInfo) Name() string { return s.name }
func (s synthInfo) Size() int64  { return s.size }
func (s synthInfo) Mode() fs.FileMode {
	if s.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (s synthInfo) ModTime() time.Time { return time.Now() }
func (s synthInfo) IsDir() bool        { return s.dir }
func (s synthInfo) Sys() any           { return nil }

type renamed struct {
	fs.FileInfo
	name string
}

func (r renamed) Name() string { return r.name }
