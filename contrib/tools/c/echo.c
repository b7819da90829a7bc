/*
 * echo - the smallest useful framed tool: returns its arguments unchanged.
 *
 * Arguments: any object. Result: {"ok": <the arguments>}.
 * Content seen by the model: the compact JSON of the arguments.
 */
#include <toolexec.h>

static json_t *echo(const te_call *call, void *userdata)
{
    (void)userdata;
    /* te_ok() steals its reference; the SDK still owns call->arguments. */
    return te_ok(json_incref(call->arguments));
}

int main(void)
{
    return te_worker_main(echo, NULL);
}
