package episode_test
import ("testing";"fmt";"context";"tau2rl/producers/episode";"tau2rl/schemas")
func TestDbg(t *testing.T){
 te := newTestEnv(t, envOpts{domain:"airline", errorRate:1})
 set := tasks(t,"airline","train")
 for _, id := range []string{"1","3","4","5","7"} {
  task,_ := set.Get(id)
  for k:=0;k<3;k++{
   res := te.runner.Run(context.Background(), episode.Input{Task: task, Split: "train", ID: fmt.Sprintf("e%s-%d",id,k), Sampling: schemas.SamplingParams{MaxTokens: 1024}})
   fmt.Println(id, k, res.Traj.Reward, res.Traj.InvalidFormatTurns, res.Traj.Termination, len(res.Traj.Messages))
  }
 }
}
