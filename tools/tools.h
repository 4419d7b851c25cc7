/* Shared pieces of the `hotset` command's subcommands. */
#ifndef HS_TOOLS_H
#define HS_TOOLS_H

#include "hotset.h"

/* Options every subcommand takes, set by `hotset [GLOBAL] SUBCOMMAND`. */
struct hs_cli {
	const char *topology;  /* --topology FILE or $HOTSET_TOPOLOGY, else NULL */
	int verbose;
};

extern struct hs_cli hs_cli;

/* Prints "hotset SUB: message" on stderr and returns 1, the exit status of a
 * failed subcommand. */
int hs_cli_fail(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints a usage hint after a bad flag and returns 2. */
int hs_cli_usage_error(const char *sub);

/* Splits a comma-separated flag value into items (pointers into buf, a
 * copy of s of n bytes): at most max, none empty ("1,,2" and "cpu," are
 * refused), else one line "hotset SUB: FLAG S: ..." and 1. */
int hs_cli_split_list(const char *sub, const char *flag, const char *s, char *buf, size_t n, char **items, int max,
		      int *count);

/* Checks before long work that `path` can be written: its folder exists
 * (none is created) and takes new files, and it is not a folder itself;
 * else one line "hotset SUB: FLAG PATH: ..." and 1. */
int hs_cli_check_output(const char *sub, const char *flag, const char *path);

/* Opens the topology chosen by --topology / $HOTSET_TOPOLOGY / this machine. */
int hs_cli_open_topology(const char *sub, hs_topology **t);

/* Strict number arguments: the whole string, inside lo..hi, else one line
 * "hotset SUB: FLAG VALUE: ..." and 1. */
int hs_cli_parse_int(const char *sub, const char *flag, const char *s, long lo, long hi, int *out);
int hs_cli_parse_num(const char *sub, const char *flag, const char *s, double lo, double hi, double *out);

/* 13219200 -> "13,219,200" in buf. */
const char *hs_cli_grouped(uint64_t v, char *buf, size_t n);

int hs_cmd_topo(int argc, char **argv);
int hs_cmd_gen(int argc, char **argv);
int hs_cmd_model(int argc, char **argv);
int hs_cmd_run_layer(int argc, char **argv);
int hs_cmd_run(int argc, char **argv);
int hs_cmd_tune(int argc, char **argv);
int hs_cmd_plan(int argc, char **argv);
int hs_cmd_trace(int argc, char **argv);
int hs_cmd_bench(int argc, char **argv);
int hs_cmd_tokenize(int argc, char **argv);
int hs_cmd_bench_e2e(int argc, char **argv);
/* `hotset serve`: defined in server/serve.c (the server includes only hotset.h) */
int hs_cmd_serve(int argc, char **argv);

#endif
