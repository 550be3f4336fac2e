// A user's program with classes named like the library's internals: with
// the umbrella header and `using namespace npucache`, none is ambiguous.
#include <npucache/npucache.h>

using namespace npucache;

struct Block {
  int layers = 2;
};
struct Stream {
  int id = 0;
};
struct Event {};
struct TaskGraph {};
struct KernelLaunch {};
struct Model : nn::Module {
  Tensor forward(const Tensor& x) { return x; }
};

int main() {
  Block b;
  Stream s;
  Event e;
  TaskGraph g;
  KernelLaunch k;
  (void)e;
  (void)g;
  (void)k;
  return b.layers - 2 + s.id;
}
