// doctest's main, inside MPI_Init/MPI_Finalize: the layer and step tests run the MPI
// communicator over MPI_COMM_SELF (a singleton MPI start needs no launcher).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  doctest::Context context(argc, argv);
  const int result = context.run();
  MPI_Finalize();
  return result;
}
