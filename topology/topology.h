/* Internal topology facts that need hwloc to answer. */
#ifndef HS_TOPOLOGY_INTERNAL_H
#define HS_TOPOLOGY_INTERNAL_H

/* The hwloc version this library was compiled against, e.g. "2.9.0". */
const char *hs__hwloc_version(void);

#endif
