// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A kernel's preemption model from the texts that say it (preempt.h). */
#include <string.h>

#include "capture/preempt.h"

static const char *const models[] = { "none", "voluntary", "lazy", "full", "rt" };

/* The model named by the n bytes at s, or NULL. */
static const char *model_named(const char *s, size_t n)
{
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		if (strlen(models[i]) == n && !strncmp(s, models[i], n))
			return models[i];
	}
	return NULL;
}

static const char *from_debugfs(const char *t)
{
	const char *open = t ? strchr(t, '(') : NULL;
	const char *close = open ? strchr(open, ')') : NULL;

	return close ? model_named(open + 1, (size_t)(close - open - 1)) : NULL;
}

static const char *from_cmdline(const char *t)
{
	const char *found = NULL;

	for (const char *p = t; p && (p = strstr(p, "preempt=")); p += 8) {
		const char *v = p + 8;

		if (p != t && p[-1] != ' ')
			continue; /* another parameter's tail (xpreempt=) */
		found = model_named(v, strcspn(v, " \t\n"));
	}
	return found;
}

/* Whether config has the line "NAME=y". */
static bool config_has(const char *config, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = config; (p = strstr(p, name)); p += n) {
		if ((p == config || p[-1] == '\n') && !strncmp(p + n, "=y", 2) &&
		    (p[n + 2] == '\n' || p[n + 2] == '\0'))
			return true;
	}
	return false;
}

static const char *from_config(const char *t)
{
	if (!t)
		return NULL;
	if (config_has(t, "CONFIG_PREEMPT_RT"))
		return "rt";
	if (config_has(t, "CONFIG_PREEMPT"))
		return "full";
	if (config_has(t, "CONFIG_PREEMPT_LAZY"))
		return "lazy";
	if (config_has(t, "CONFIG_PREEMPT_VOLUNTARY"))
		return "voluntary";
	if (config_has(t, "CONFIG_PREEMPT_NONE"))
		return "none";
	return NULL;
}

const char *preempt__model(const char *debugfs, const char *cmdline, const char *config)
{
	const char *m = from_debugfs(debugfs), *built = from_config(config);

	if (m)
		return m;
	/* preempt= counts only where the model is chosen at boot (PREEMPT_DYNAMIC) */
	if (built && (!strcmp(built, "rt") || !config_has(config, "CONFIG_PREEMPT_DYNAMIC")))
		return built;
	m = from_cmdline(cmdline);
	/* with no config to say so, a kernel built full (which ignores preempt=) cannot be told
	 * from one that chose less at boot: only preempt=full is taken at its word */
	if (m && !built && !preempt__inside_syscalls(m))
		return NULL;
	return m ? m : built;
}

bool preempt__inside_syscalls(const char *model)
{
	return !model || !strcmp(model, "full") || !strcmp(model, "rt");
}
