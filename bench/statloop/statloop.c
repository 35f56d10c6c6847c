/* statloop: N calls on one path, timed inside, printed in ms.
 * MODE (third argument) picks the call: stat (default), lstat, open
 * (open O_RDONLY and close: the call Landlock checks and the seccomp
 * filter runs on, unlike stat) or openrw (O_RDWR: under native's write
 * mediation a round trip to the host's supervisor). A system-call-heavy loop for
 * bench/gvisor.sh (gVisor's platforms vs the bare host) and
 * bench/inside.sh (each of native's protections vs none); static, so it
 * runs in any root. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 50000;
	const char *path = argc > 2 ? argv[2] : "/";
	const char *mode = argc > 3 ? argv[3] : "stat";
	struct stat st;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		int rc;
		if (strcmp(mode, "open") == 0 || strcmp(mode, "openrw") == 0) {
			int fd = open(path, (mode[4] ? O_RDWR : O_RDONLY) | O_CLOEXEC);
			rc = fd < 0 ? -1 : close(fd);
		} else if (strcmp(mode, "lstat") == 0) {
			rc = lstat(path, &st);
		} else {
			rc = stat(path, &st);
		}
		if (rc != 0) {
			perror(mode);
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.3f\n", (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
	return 0;
}
