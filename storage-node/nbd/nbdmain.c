/* nbdmain.c - bqos-nbd-node: the block storage node (NBD front, file backend, token scheduler) as a program of its own; bqos-node --backend file:PATH runs the same code. */
#include "storage-node/nbd/nbdnode.h"

int main(int argc, char **argv)
{
    return nbdnode_main(argc, argv, "bqos-nbd-node");
}
