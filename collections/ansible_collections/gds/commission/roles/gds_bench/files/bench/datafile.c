/* Every file a run opens, creates or removes: its data files, their target
 * directories and the --json record (docs/benchmark.md#data-files). A target
 * may sit in a scratch or network directory that others can write, so the
 * last component of a path is never followed when it is a link: a target
 * directory is opened with O_DIRECTORY|O_NOFOLLOW, a file relative to its
 * directory's descriptor with O_NOFOLLOW, a new file with O_EXCL. An existing
 * file must be a regular file of the running user; a file is removed only
 * while it is still the one this run created (unlinkat never follows a link). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gdsbench.h"

static const char *file_kind(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	return "an unknown file type";
}

/* The rule, for what fstatat(AT_SYMLINK_NOFOLLOW) or fstat found at shown:
 * 0, or -1 with why. ours: the file this run created (same device and inode),
 * which stands for the owner check (NFS root_squash gives root's new files
 * the anonymous uid). */
static int refusal(const struct stat *st, const struct stat *ours, const char *shown, char *err, size_t len)
{
	if (S_ISLNK(st->st_mode))
		snprintf(err, len, "refusing %s: a symbolic link, not followed", shown);
	else if (!S_ISREG(st->st_mode))
		snprintf(err, len, "refusing %s: not a regular file (%s)", shown, file_kind(st->st_mode));
	else if (ours && (st->st_dev != ours->st_dev || st->st_ino != ours->st_ino))
		snprintf(err, len, "refusing %s: replaced by another file during the run", shown);
	else if (!ours && st->st_uid != geteuid())
		snprintf(err, len, "refusing %s: owned by uid %u, not by the running user (uid %u)", shown,
			 (unsigned)st->st_uid, (unsigned)geteuid());
	else
		return 0;
	return -1;
}

/* "d/" and "d/." resolve a link d even with O_NOFOLLOW: the path without them */
static void strip_tail(const char *path, char *out, size_t len)
{
	size_t n;

	snprintf(out, len, "%s", path[0] ? path : ".");
	while ((n = strlen(out)) > 1) {
		if (out[n - 1] == '/')
			out[n - 1] = 0;
		else if (out[n - 1] == '.' && out[n - 2] == '/')
			out[n - 1] = 0;
		else
			break;
	}
}

int df_dir_open(const char *dir, int nofollow, char *err, size_t len)
{
	char p[PATH_MAX];
	struct stat st;
	int fd, e;

	if (strlen(dir) >= sizeof(p)) {
		snprintf(err, len, "%.64s...: %s", dir, strerror(ENAMETOOLONG));
		errno = ENAMETOOLONG;
		return DF_ERRNO;
	}
	strip_tail(dir, p, sizeof(p));
	/* O_PATH: only a handle for the *at calls, no read permission needed */
	fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
	if (fd >= 0)
		return fd;
	e = errno;
	if (nofollow && lstat(p, &st) == 0 && S_ISLNK(st.st_mode)) {
		snprintf(err, len, "refusing %s: a symbolic link, not followed (give the directory it points to)", dir);
		return DF_REFUSED;
	}
	if (e == ENOTDIR)
		snprintf(err, len, "%s is not a directory", dir);
	else
		snprintf(err, len, "%s: %s", dir, strerror(e));
	errno = e;
	return DF_ERRNO;
}

int df_split(const char *path, char *dir, size_t dlen, char *name, size_t nlen)
{
	char p[PATH_MAX];
	char *slash;

	if (strlen(path) >= sizeof(p) || !path[0])
		return -1;
	strip_tail(path, p, sizeof(p));
	slash = strrchr(p, '/');
	if (!slash || slash == p) {
		if ((size_t)snprintf(dir, dlen, "%s", slash ? "/" : ".") >= dlen)
			return -1;
		return (size_t)snprintf(name, nlen, "%s", slash ? p + 1 : p) >= nlen || !name[0] ? -1 : 0;
	}
	*slash = 0;
	if ((size_t)snprintf(dir, dlen, "%s", p) >= dlen)
		return -1;
	return (size_t)snprintf(name, nlen, "%s", slash + 1) >= nlen ? -1 : 0;
}

int df_stat(int dirfd, const char *name, const char *shown, struct stat *st, char *err, size_t len)
{
	if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) != 0) {
		int e = errno;

		snprintf(err, len, "%s: %s", shown, strerror(e));
		errno = e;
		return DF_ERRNO;
	}
	return refusal(st, NULL, shown, err, len) ? DF_REFUSED : DF_OK;
}

/* The checked file again, opened with the caller's flags alone: cuFileHandleRegister refuses a
 * descriptor whose status flags hold O_NOFOLLOW or O_NONBLOCK ("unsupported file open flags",
 * 5019), which the safe open needed. Reopening /proc/self/fd/N reaches the very file the
 * descriptor holds (no name is looked up again), so nothing can be swapped in; the new
 * descriptor is checked to be that file. Without /proc, O_NONBLOCK is cleared and the rest kept. */
static int reopen_plain(int fd, int flags, const struct stat *st, const char *shown, char *err, size_t len)
{
	char self[64];
	struct stat again;
	int plain, e;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	plain = open(self, (flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOFOLLOW | O_NONBLOCK)) | O_NOCTTY | O_CLOEXEC);
	if (plain < 0 && errno == ENOENT) {
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0)
			return fd;
	}
	if (plain < 0 || fstat(plain, &again) != 0 || again.st_dev != st->st_dev || again.st_ino != st->st_ino) {
		e = plain < 0 ? errno : EXDEV;
		snprintf(err, len, "reopen %s: %s", shown, plain < 0 ? strerror(e) : "not the file that was checked");
		if (plain >= 0)
			close(plain);
		close(fd);
		errno = e;
		return -1;
	}
	close(fd);
	return plain;
}

int df_open(int dirfd, const char *name, const char *shown, int flags, const struct stat *ours, int *created,
	    struct stat *st, char *err, size_t len)
{
	int fd = -1, made = 0, e;

	if (created)
		*created = 0;
	/* a few rounds: the name may come and go between the check and the open
	 * (another thread of a shared file creates it) */
	for (int round = 0; round < 4 && fd < 0; round++) {
		if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (refusal(st, ours, shown, err, len))
				return DF_REFUSED;	/* never opened: a FIFO is not waited on, a device not touched */
			/* O_NONBLOCK: a FIFO swapped in after the check does not block the open */
			fd = openat(dirfd, name, (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_NOFOLLOW | O_NONBLOCK |
				    O_NOCTTY | O_CLOEXEC);
			if (fd < 0 && errno != ENOENT && errno != ELOOP)
				break;
		} else if (errno == ENOENT && (flags & O_CREAT) && !ours) {
			fd = openat(dirfd, name, flags | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0644);
			made = fd >= 0;
			if (fd < 0 && errno != EEXIST)
				break;
		} else {
			break;
		}
	}
	if (fd < 0) {
		e = errno;
		snprintf(err, len, "open %s: %s", shown, strerror(e));
		errno = e;
		return DF_ERRNO;
	}
	/* what was opened decides: a file swapped in between is refused as well */
	if (fstat(fd, st) != 0) {
		e = errno;
		snprintf(err, len, "fstat %s: %s", shown, strerror(e));
		close(fd);
		errno = e;
		return DF_ERRNO;
	}
	if (made) {
		/* created with O_EXCL: ours, whatever owner the file system gave it */
		if (refusal(st, st, shown, err, len)) {
			close(fd);
			return DF_REFUSED;
		}
	} else if (refusal(st, ours, shown, err, len)) {
		close(fd);
		return DF_REFUSED;
	}
	fd = reopen_plain(fd, flags, st, shown, err, len);
	if (fd < 0)
		return DF_ERRNO;
	if (created)
		*created = made;
	return fd;
}

int df_unlink(int dirfd, const char *name, const struct stat *ours)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_dev != ours->st_dev || st.st_ino != ours->st_ino)
		return -1;	/* gone, or not the file this run made: left alone */
	return unlinkat(dirfd, name, 0);
}
