/* statloop: N stat(2) calls of one path, timed inside, printed in ms.
 * A system-call-heavy loop for bench/gvisor.sh (gVisor's platforms vs
 * the bare host); static, so it runs in any root. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 50000;
	const char *path = argc > 2 ? argv[2] : "/";
	struct stat st;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		if (stat(path, &st) != 0) {
			perror("stat");
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.3f\n", (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
	return 0;
}
