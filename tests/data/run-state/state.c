/* One program, many ways to keep state from one run for the next (issue 26).
 *
 *   state CHANNEL write VALUE   keep VALUE in CHANNEL (kernel: keys, keys-user, mq, shm)
 *   state CHANNEL read          print what CHANNEL holds, or "none"
 *   state keys clear            invalidate the keys a write made (test hygiene)
 *   state sock NAME             connect to the abstract unix socket NAME: "connected" or "refused"
 *   state TREE                  in the working directory (dir, link, xattr, rewrite, longpath, mode,
 *                               fifo): print "state: ..." when an earlier run left its mark, else
 *                               "fresh" and leave the mark for the next run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static int keyrings(long *ids, int user_only)
{
    int n = 0;
    ids[n++] = KEY_SPEC_USER_KEYRING;
    if (user_only)
        return n;
    ids[n++] = KEY_SPEC_SESSION_KEYRING;
    ids[n++] = KEY_SPEC_USER_SESSION_KEYRING;
    long persistent = syscall(SYS_keyctl, KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_PROCESS_KEYRING);
    if (persistent > 0)
        ids[n++] = persistent;
    /* Keys are not namespaced: every keyring /proc/keys lists can be named by its serial. */
    FILE *f = fopen("/proc/keys", "r");
    char line[512];
    while (f && n < 256 && fgets(line, sizeof line, f))
        if (strstr(line, " keyring "))
            ids[n++] = strtol(line, NULL, 16);
    if (f)
        fclose(f);
    return n;
}

static int keys(const char *op, const char *value, int user_only)
{
    long ids[256];
    int n = keyrings(ids, user_only), wrote = 0, err = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(op, "write")) {
            if (syscall(SYS_add_key, "user", "pw-run-state", value, strlen(value), ids[i]) > 0)
                wrote++;
            else
                err = errno;
            continue;
        }
        long k = syscall(SYS_keyctl, KEYCTL_SEARCH, ids[i], "user", "pw-run-state", 0);
        if (k <= 0)
            continue;
        if (!strcmp(op, "clear")) {
            syscall(SYS_keyctl, KEYCTL_INVALIDATE, k);
            continue;
        }
        char buf[128] = {0};
        syscall(SYS_keyctl, KEYCTL_READ, k, buf, sizeof buf - 1);
        printf("%s\n", buf);
        return 0;
    }
    if (!strcmp(op, "write"))
        printf("wrote %d (%s)\n", wrote, wrote ? "ok" : strerror(err));
    else if (!strcmp(op, "read"))
        printf("none\n");
    return 0;
}

static int mq(const char *op, const char *value)
{
    struct mq_attr attr = {.mq_maxmsg = 1, .mq_msgsize = 64};
    if (!strcmp(op, "write")) {
        mqd_t q = mq_open("/pw-run-state", O_CREAT | O_WRONLY, 0600, &attr);
        if (q == (mqd_t)-1 || mq_send(q, value, strlen(value), 0) != 0) {
            printf("cannot: %s\n", strerror(errno));
            return 0;
        }
        printf("wrote\n");
        return 0;
    }
    if (!strcmp(op, "clear"))
        return mq_unlink("/pw-run-state"), 0;
    char buf[64] = {0};
    mqd_t q = mq_open("/pw-run-state", O_RDONLY | O_NONBLOCK);
    if (q == (mqd_t)-1 || mq_receive(q, buf, sizeof buf, NULL) < 0)
        printf("none\n");
    else
        printf("%s\n", buf);
    return 0;
}

static int shm(const char *op, const char *value)
{
    int id = shmget(0x70770026, 64, !strcmp(op, "write") ? IPC_CREAT | 0600 : 0);
    if (id < 0) {
        printf(!strcmp(op, "write") ? "cannot\n" : "none\n");
        return 0;
    }
    if (!strcmp(op, "clear"))
        return shmctl(id, IPC_RMID, NULL), 0;
    char *p = shmat(id, NULL, 0);
    if (!strcmp(op, "write")) {
        strncpy(p, value, 63);
        printf("wrote\n");
    } else {
        printf("%s\n", p[0] ? p : "none");
    }
    return 0;
}

static int sock(const char *name)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path + 1, name, sizeof a.sun_path - 2);  /* abstract: a leading NUL */
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    int r = connect(s, (struct sockaddr *)&a, sizeof(sa_family_t) + 1 + strlen(name));
    printf(r == 0 ? "connected\n" : "refused\n");
    return 0;
}

static int tree(const char *how)
{
    struct stat st;
    if (!strcmp(how, "dir")) {
        if (mkdir(".seen", 0755) != 0 && errno == EEXIST)
            return puts("state: .seen"), 0;
    } else if (!strcmp(how, "link")) {
        if (symlink("/", ".root") != 0 && errno == EEXIST)
            return puts("state: .root"), 0;
    } else if (!strcmp(how, "xattr")) {
        char buf[32] = {0};
        if (getxattr("input.dat", "user.runs", buf, sizeof buf - 1) > 0)
            return printf("state: user.runs=%s\n", buf), 0;
        if (setxattr("input.dat", "user.runs", "1", 1, 0) != 0)
            return printf("cannot: %s\n", strerror(errno)), 0;
    } else if (!strcmp(how, "rewrite")) {
        char buf[16] = {0};
        int fd = open("input.dat", O_RDWR);
        fstat(fd, &st);
        read(fd, buf, sizeof buf - 1);
        if (strcmp(buf, "data\n") != 0)
            return printf("state: input.dat holds %s", buf), 0;
        pwrite(fd, "DATA\n", 5, 0);  /* same size */
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        futimens(fd, times);  /* and its mtime put back */
        close(fd);
    } else if (!strcmp(how, "longpath")) {
        if (stat(".deep", &st) == 0)
            return puts("state: .deep"), 0;
        char name[201];
        memset(name, 'd', 200);
        name[200] = 0;
        mkdir(".deep", 0755);
        if (chdir(".deep") != 0)
            return puts("cannot"), 0;
        for (int i = 0; i < 30; i++)  /* 30 x 201 bytes: far past PATH_MAX (4096) */
            if (mkdir(name, 0755) != 0 || chdir(name) != 0)
                return printf("cannot: %s\n", strerror(errno)), 0;
        int fd = open("bottom", O_CREAT | O_WRONLY, 0644);
        write(fd, "kept\n", 5);
        close(fd);
    } else if (!strcmp(how, "mode")) {
        if (stat("input.dat", &st) == 0 && (st.st_mode & 0100))
            return puts("state: input.dat is executable"), 0;
        chmod("input.dat", 0755);
    } else if (!strcmp(how, "fifo")) {
        if (mkfifo(".pipe", 0600) != 0 && errno == EEXIST)
            return puts("state: .pipe"), 0;
    } else {
        return fprintf(stderr, "unknown channel %s\n", how), 2;
    }
    puts("fresh");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const char *ch = argv[1], *op = argc > 2 ? argv[2] : "", *value = argc > 3 ? argv[3] : "";
    if (!strcmp(ch, "keys") || !strcmp(ch, "keys-user"))
        return keys(op, value, !strcmp(ch, "keys-user"));
    if (!strcmp(ch, "mq"))
        return mq(op, value);
    if (!strcmp(ch, "shm"))
        return shm(op, value);
    if (!strcmp(ch, "sock"))
        return sock(op);
    return tree(ch);
}
