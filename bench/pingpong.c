/* pingpong: a plain pinned pipe ping-pong, the reference of bench/pipe-vs-perf outside pmlab's
 * code. Two processes (fork) exchange a 4-byte int over two pipes LOOPS times; the parent
 * writes first. The parent runs on CPU A, the child on CPU B (A may equal B); each pins itself
 * before the timed part starts, so the timing holds only the round trips, fork and reaping
 * (as perf bench sched pipe times them).
 * Usage: pingpong LOOPS A B      Prints: "X usecs/op" (perf's wording).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set)) {
        perror("sched_setaffinity");
        exit(2);
    }
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s LOOPS CPU_A CPU_B\n", argv[0]);
        return 2;
    }
    long loops = atol(argv[1]);
    int a = atoi(argv[2]), b = atoi(argv[3]);
    int p1[2], p2[2], m = 0;
    if (loops <= 0 || pipe(p1) || pipe(p2)) {
        fprintf(stderr, "bad LOOPS or no pipe\n");
        return 2;
    }
    /* The child inherits A; it moves to B itself before its first read. */
    pin(a);
    double t0 = now_us();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) {
        if (b != a)
            pin(b);
        for (long i = 0; i < loops; i++) {
            if (read(p1[0], &m, sizeof m) != sizeof m || write(p2[1], &m, sizeof m) != sizeof m)
                _exit(1);
        }
        _exit(0);
    }
    for (long i = 0; i < loops; i++) {
        if (write(p1[1], &m, sizeof m) != sizeof m || read(p2[0], &m, sizeof m) != sizeof m)
            return 1;
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "child failed\n");
        return 1;
    }
    double us = now_us() - t0;
    printf("%.3f usecs/op\n", us / loops);
    return 0;
}
