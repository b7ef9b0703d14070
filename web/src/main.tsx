import { render } from 'preact'
import { App } from './ui/App'
import 'highlight.js/styles/github.css'
import './styles.css'
import './messages.css'

render(<App />, document.getElementById('root')!)
