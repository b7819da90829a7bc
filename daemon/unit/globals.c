/* The daemon's globals (defined in main.c) for unit tests that link a
 * module reading them: the defaults, no loop. */
#include "toolexecd.h"

struct td_config td_cfg = {.log_level = TD_LOG_ERR};
uv_loop_t *td_loop;
bool td_shutting_down;

/* main.c ends the loop here once nothing keeps the daemon alive; a test
 * runs its loop itself. */
void td_maybe_exit(void)
{
}
