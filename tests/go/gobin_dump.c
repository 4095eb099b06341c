// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* What user/capture/gobin.c reads from Go executables, as one JSON line each, for
 * tests/go/check_gobin.py to hold against Go's own tools (go tool nm, go tool objdump).
 *
 *   gobin_dump FILE...
 */
#include <stdio.h>
#include <string.h>

#include "capture/gobin.h"

static void func_json(const char *name, const struct gobin_func *f)
{
	printf("\"%s\":{\"vaddr\":%llu,\"size\":%llu,\"offset\":%llu,\"body\":%llu,"
	       "\"rets\":[", name, (unsigned long long)f->vaddr, (unsigned long long)f->size,
	       (unsigned long long)f->offset, (unsigned long long)f->body);
	for (size_t i = 0; i < f->nrets; i++)
		printf("%s%llu", i ? "," : "", (unsigned long long)f->rets[i]);
	printf("]}");
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		struct gobin g;
		char why[256];
		int err = gobin__inspect(argv[i], &g, why, sizeof(why));

		/* the paths and messages are the tests' own: no escaping needed beyond quotes */
		printf("{\"path\":\"%s\",\"err\":%d,\"why\":\"%s\",\"version\":\"%s\",\"pie\":%s,"
		       "\"symtab\":%s,", argv[i], err, why, g.version, g.pie ? "true" : "false",
		       g.has_symtab ? "true" : "false");
		func_json("read", &g.read);
		printf(",");
		func_json("write", &g.write);
		printf("}\n");
	}
	return 0;
}
