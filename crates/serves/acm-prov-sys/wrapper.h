#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <infiniband/umad.h>
#include <infiniband/acm.h>
#include <infiniband/acm_prov.h>
