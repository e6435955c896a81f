#include <enet/enet.h>
