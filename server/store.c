/* Finished Responses kept for `previous_response_id`: the conversation each
 * one ended with (its input, without the instructions, then its output as
 * an assistant message), as compact JSON text: the last STORE_N of them,
 * each for STORE_S seconds.  A later request that names one starts from it;
 * its prompt then begins as that response's did, so the prompt cache
 * serves what it still holds.  One store per process (one server), under
 * its own lock: the scheduler puts, the HTTP threads get. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define STORE_N 32
#define STORE_S 600.0

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char id[48];
	double t;
	char *conv;
} slot[STORE_N];
static int next;

/* Each U+0000 in the JSON text t as U+FFFD, in place (the same length).
 * The chat formats' messages are C strings (hs_chat_message), so a NUL a
 * random model wrote could not go on into the next prompt; and jansson
 * reads \u0000 only when asked, as request bodies do not. */
static void no_nul(char *t)
{
	for (; *t; t++)
		if (*t == '\\' && t[1] == 'u' && !strncmp(t + 2, "0000", 4))
			memcpy(t + 2, "fffd", 4);
		else if (*t == '\\' && t[1])
			t++; /* an escaped character: \\u0000 is a backslash, then text */
}

void hs_srv_store_put(const char *id, json_t *conv)
{
	char *t = conv ? json_dumps(conv, JSON_COMPACT) : NULL;
	if (!t)
		return; /* out of memory: the response is not kept (a later request naming it gets a 400) */
	no_nul(t);
	pthread_mutex_lock(&mu);
	free(slot[next].conv);
	snprintf(slot[next].id, sizeof slot[next].id, "%s", id);
	slot[next].t = hs_srv_now();
	slot[next].conv = t;
	next = (next + 1) % STORE_N;
	pthread_mutex_unlock(&mu);
}

json_t *hs_srv_store_get(const char *id)
{
	json_t *j = NULL;
	const double now = hs_srv_now();
	pthread_mutex_lock(&mu);
	for (int i = 0; i < STORE_N && !j; i++)
		if (slot[i].conv && strcmp(slot[i].id, id) == 0 && now - slot[i].t <= STORE_S)
			j = json_loads(slot[i].conv, 0, NULL);
	pthread_mutex_unlock(&mu);
	return j;
}

void hs_srv_store_clear(void)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < STORE_N; i++) {
		free(slot[i].conv);
		slot[i].conv = NULL;
	}
	pthread_mutex_unlock(&mu);
}
